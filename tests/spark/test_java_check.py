"""Java is checked before Spark starts, with a message that says what to install."""

from __future__ import annotations

import stat

import pytest

from deltatx.errors import SparkUnavailableError
from deltatx.spark.session import java_version


def _fake_java(tmp_path, version_line: str) -> str:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(home)


def test_missing_java_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk-here"))
    with pytest.raises(SparkUnavailableError, match="Install a JDK"):
        java_version()


def test_old_java_is_refused_with_its_version(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15'))
    with pytest.raises(SparkUnavailableError, match="Java 11"):
        java_version()


def test_legacy_version_string_and_a_good_java(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path, 'java version "1.8.0_392"'))
    with pytest.raises(SparkUnavailableError, match="Java 8"):
        java_version()
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path / "new", 'openjdk version "17.0.15" 2025-04-15'))
    assert java_version() == 17


def test_the_machine_java_is_usable():
    assert java_version() >= 17  # what `make test` needs for the Spark tests
