"""The Delta transaction log: actions, storage, snapshots by log replay, checkpoints."""
