"""One module per table operation. Each only *stages* actions on a Transaction; none commits."""
