"""Failures raise karu.Error with .status, as the subclass that also derives from the
matching builtin."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from conftest import Moto, Nginx

import karu


def test_not_found_is_file_not_found(nginx: Nginx, moto: Moto) -> None:
    for client, uri in [
        (karu.Client(hermetic=True), f"{nginx.url}/missing.bin"),
        (moto.client(), moto.uri("missing.bin")),
    ]:
        with pytest.raises(FileNotFoundError) as caught:
            client.read(uri, 0, 10)
        e = caught.value
        assert isinstance(e, karu.NotFoundError) and isinstance(e, karu.Error)
        assert e.status == karu.Status.NOT_FOUND, (uri, e)
        assert str(e) == e.message and e.message
        for call in (lambda: client.stat(uri), lambda: client.read_ends(uri, 1, 1)):
            with pytest.raises(karu.NotFoundError):
                call()


def test_bad_credentials_are_permission_errors(moto: Moto) -> None:
    client = karu.Client({**moto.options(), "AWS_SECRET_ACCESS_KEY": "wrong"}, hermetic=True)
    with pytest.raises(PermissionError) as caught:
        client.read(moto.uri("small.bin"), 0, 10)
    assert isinstance(caught.value, karu.AuthError)
    assert caught.value.status == karu.Status.AUTH


def test_missing_credentials_are_permission_errors(moto: Moto) -> None:
    # Hermetic, with an endpoint but no key and no anonymous access: none can be had.
    client = karu.Client({"AWS_S3_ENDPOINT": moto.url, "AWS_VIRTUAL_HOSTING": "NO"}, True)
    with pytest.raises(PermissionError) as caught:
        client.read(moto.uri("small.bin"), 0, 10)
    assert isinstance(caught.value, karu.CredentialsError)
    assert caught.value.status == karu.Status.CREDENTIALS


def test_timeouts_are_timeout_errors(testkit: str) -> None:
    client = karu.Client({"KARU_REQUEST_TIMEOUT": "1", "KARU_MAX_ATTEMPTS": "1"}, True)
    with pytest.raises(TimeoutError) as caught:
        client.read(f"{testkit}/ok/slow.bin?size=100&delay_ms=3000", 0, 10)
    assert isinstance(caught.value, karu.TimeoutError)
    assert caught.value.status == karu.Status.TIMEOUT


def test_invalid_and_malformed_are_value_errors(nginx: Nginx) -> None:
    client = karu.Client(hermetic=True)
    with pytest.raises(ValueError) as caught:
        client.read("", 0, 1)
    assert isinstance(caught.value, karu.MalformedUriError)
    assert caught.value.status == karu.Status.URI
    with pytest.raises(ValueError) as caught2:
        client.read(f"{nginx.url}/small.bin", 0, 0)  # an empty read is invalid
    assert isinstance(caught2.value, karu.InvalidError)
    assert caught2.value.status == karu.Status.INVALID


def test_a_missing_or_unreadable_local_file_is_the_builtin_error(tmp_path: Path) -> None:
    client = karu.Client(hermetic=True)
    # karu reports local file errors as IO (the spec's status), with the system's text; the
    # exception also derives from the builtin that names the system's reason.
    with pytest.raises(FileNotFoundError) as missing:
        client.read(str(tmp_path / "missing.bin"), 0, 1)
    assert isinstance(missing.value, karu.FileMissingError)
    assert missing.value.status == karu.Status.IO
    assert "No such file" in str(missing.value)
    with pytest.raises(FileNotFoundError):
        with karu.open(str(tmp_path / "missing.bin")) as f:
            f.read(1)
    if os.geteuid() != 0:  # root reads a file whatever its mode
        locked = tmp_path / "locked.bin"
        locked.write_bytes(b"x")
        locked.chmod(0)
        with pytest.raises(PermissionError) as denied:
            client.read(str(locked), 0, 1)
        assert isinstance(denied.value, karu.FilePermissionError)
    # Other IO errors stay plain: a directory is no file to read.
    with pytest.raises(karu.Error) as directory:
        client.read(str(tmp_path), 0, 1)
    assert type(directory.value) is karu.Error
    assert directory.value.status == karu.Status.IO


def test_other_statuses_are_plain_errors(nginx: Nginx) -> None:
    client = karu.Client(hermetic=True)
    with pytest.raises(karu.Error) as caught:
        client.read(f"{nginx.url}/small.bin", 990, 20)
    assert type(caught.value) is karu.Error
    assert caught.value.status == karu.Status.RANGE


def test_errors_pickle() -> None:
    e = karu._errors._from_status(-13, "gone")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is karu.NotFoundError
    assert (back.status, back.message) == (karu.Status.NOT_FOUND, "gone")


def test_local_io_reasons_map_to_builtins() -> None:
    # What the native module passes for a local file's I/O error (root, as in CI, reads any
    # file, so a real permission error cannot be made there).
    denied = karu._errors._from_status(-5, "locked.bin: Permission denied", "permission")
    assert isinstance(denied, karu.FilePermissionError)
    assert isinstance(denied, PermissionError)
    assert denied.status == karu.Status.IO
    missing = karu._errors._from_status(-5, "gone.bin: No such file", "not_found")
    assert isinstance(missing, FileNotFoundError)
    # The reason only refines IO: another status keeps its own class.
    assert type(karu._errors._from_status(-7, "HTTP 500", "not_found")) is karu.Error
    back = pickle.loads(pickle.dumps(missing))
    assert type(back) is karu.FileMissingError
