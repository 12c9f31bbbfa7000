"""Failures raise karu.Error with .status, as the subclass that also derives from the
matching builtin."""

from __future__ import annotations

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


def test_other_statuses_are_plain_errors(nginx: Nginx, tmp_path: Path) -> None:
    client = karu.Client(hermetic=True)
    # karu reports a missing local file as IO, with the system's text.
    with pytest.raises(karu.Error) as io_error:
        client.read(str(tmp_path / "missing.bin"), 0, 1)
    assert io_error.value.status == karu.Status.IO
    assert "No such file" in str(io_error.value)
    with pytest.raises(karu.Error) as caught:
        client.read(f"{nginx.url}/small.bin", 990, 20)
    assert type(caught.value) is karu.Error
    assert caught.value.status == karu.Status.RANGE


def test_errors_pickle() -> None:
    e = karu._errors._from_status(-13, "gone")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is karu.NotFoundError
    assert (back.status, back.message) == (karu.Status.NOT_FOUND, "gone")
