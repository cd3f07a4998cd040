"""deltalake's (delta-rs / object_store) S3 storage options, as its users write them, become the
right s3fs arguments; values deltatx cannot honour are refused, naming the option.

The key names follow delta-rs's crates/aws constants (AWS_PROFILE, AWS_S3_LOCKING_PROVIDER,
AWS_S3_ADDRESSING_STYLE, DELTA_DYNAMO_TABLE_NAME) and object_store's AmazonS3ConfigKey
(aws_skip_signature, aws_request_payer, aws_virtual_hosted_style_request, each also without
``aws_``); object_store's booleans are true/false, 1/0, yes/no, on/off, y/n.
"""

from __future__ import annotations

import warnings

import pyarrow as pa
import pytest

import deltatx
from deltatx.errors import InvalidArgumentError
from deltatx.txnlog.s3_client import with_bounded_waits
from deltatx.txnlog.store import _s3_kwargs, _switch, open_store

#: what every S3 client gets unless the options say otherwise (txnlog/s3_client.py)
WAITS = with_bounded_waits({}, {})
PLAIN = {"use_listings_cache": False, "config_kwargs": WAITS}


def kwargs_for(options: dict) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _s3_kwargs(options)


@pytest.mark.parametrize("key", ["AWS_PROFILE", "aws_profile", "profile"])
def test_the_aws_profile_becomes_s3fs_profile(key):
    assert kwargs_for({key: "analytics"})["profile"] == "analytics"


@pytest.mark.parametrize("key", ["AWS_REQUEST_PAYER", "aws_request_payer", "request_payer"])
@pytest.mark.parametrize("value, pays", [("true", True), ("TRUE", True), ("1", True), ("requester", True),
                                         ("false", False), ("0", False)])
def test_the_request_payer_becomes_s3fs_requester_pays(key, value, pays):
    assert kwargs_for({key: value})["requester_pays"] is pays


@pytest.mark.parametrize("key", ["AWS_SKIP_SIGNATURE", "aws_skip_signature", "skip_signature"])
@pytest.mark.parametrize("value, anon", [("true", True), ("y", True), (True, True), ("false", False), ("off", False)])
def test_skip_signature_becomes_s3fs_anon(key, value, anon):
    assert kwargs_for({key: value})["anon"] is anon


@pytest.mark.parametrize("key, value, style", [
    ("AWS_FORCE_PATH_STYLE", "true", "path"),
    ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "true", "virtual"),
    ("aws_virtual_hosted_style_request", "0", "path"),
    ("virtual_hosted_style_request", "yes", "virtual"),
    ("AWS_S3_ADDRESSING_STYLE", "virtual", "virtual"),
    ("aws_s3_addressing_style", "Path", "path"),
])
def test_the_addressing_options_set_botocores_addressing_style(key, value, style):
    assert kwargs_for({key: value})["config_kwargs"] == {"s3": {"addressing_style": style}, **WAITS}


def test_the_addressing_style_is_merged_into_the_users_config_kwargs():
    given = {"retries": {"max_attempts": 2}, "s3": {"use_accelerate_endpoint": False}}
    kwargs = kwargs_for({"AWS_FORCE_PATH_STYLE": "true", "config_kwargs": given})
    assert kwargs["config_kwargs"] == {**WAITS, "retries": {"max_attempts": 2},  # the user's retries kept
                                       "s3": {"use_accelerate_endpoint": False, "addressing_style": "path"}}
    assert given == {"retries": {"max_attempts": 2}, "s3": {"use_accelerate_endpoint": False}}  # not mutated
    same = kwargs_for({"AWS_FORCE_PATH_STYLE": "true", "config_kwargs": {"s3": {"addressing_style": "path"}}})
    assert same["config_kwargs"] == {"s3": {"addressing_style": "path"}, **WAITS}


def test_region_name_goes_where_aws_region_goes():
    assert kwargs_for({"region_name": "eu-west-1"})["client_kwargs"] == {"region_name": "eu-west-1"}
    assert kwargs_for({"region_name": "eu-west-1"}) == kwargs_for({"AWS_REGION": "eu-west-1"})
    kept = kwargs_for({"region_name": "eu-west-1", "client_kwargs": {"verify": False}})
    assert kept["client_kwargs"] == {"verify": False, "region_name": "eu-west-1"}


@pytest.mark.parametrize("value", ["false", "0", False])
def test_a_force_path_style_that_is_off_forces_no_addressing_style(value):
    assert kwargs_for({"AWS_FORCE_PATH_STYLE": value})["config_kwargs"] == WAITS  # no style forced
    both_off = kwargs_for({"AWS_FORCE_PATH_STYLE": value, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"})
    assert both_off["config_kwargs"] == {"s3": {"addressing_style": "path"}, **WAITS}
    kept = kwargs_for({"aws_force_path_style": value, "config_kwargs": {"s3": {"addressing_style": "virtual"}}})
    assert kept["config_kwargs"] == {"s3": {"addressing_style": "virtual"}, **WAITS}


@pytest.mark.parametrize("options, first, second", [
    ({"AWS_REGION": "us-east-1", "region_name": "eu-west-1"}, "AWS_REGION='us-east-1'", "region_name='eu-west-1'"),
    ({"region_name": "eu-west-1", "client_kwargs": {"region_name": "us-east-1"}},
     "region_name='eu-west-1'", "client_kwargs['region_name']='us-east-1'"),
    ({"AWS_PROFILE": "prod", "profile": "dev"}, "AWS_PROFILE='prod'", "profile='dev'"),
    ({"profile": "dev", "aws_profile": "prod"}, "profile='dev'", "aws_profile='prod'"),
    ({"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "endpoint_url": "http://127.0.0.1:2"},
     "AWS_ENDPOINT_URL='http://127.0.0.1:1'", "endpoint_url='http://127.0.0.1:2'"),
    ({"AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "eu-west-1"},
     "AWS_DEFAULT_REGION='us-east-1'", "AWS_REGION='eu-west-1'"),
])
def test_two_spellings_of_one_setting_with_different_values_are_refused(options, first, second):
    with pytest.raises(InvalidArgumentError, match="give one") as refused:
        kwargs_for(options)
    assert first in str(refused.value) and second in str(refused.value)


def test_a_credential_given_twice_differently_is_refused_without_showing_it():
    with pytest.raises(InvalidArgumentError, match="AWS_SECRET_ACCESS_KEY and secret disagree") as refused:
        kwargs_for({"AWS_SECRET_ACCESS_KEY": "s3cr3t-a", "secret": "s3cr3t-b"})
    assert "s3cr3t" not in str(refused.value)


def test_two_spellings_of_one_setting_with_the_same_value_are_accepted():
    kwargs = kwargs_for({"AWS_REGION": "eu-west-1", "region_name": "eu-west-1",
                         "client_kwargs": {"region_name": "eu-west-1"},
                         "AWS_PROFILE": "prod", "profile": "prod",
                         "AWS_ENDPOINT_URL": "http://127.0.0.1:1", "endpoint_url": "http://127.0.0.1:1"})
    assert kwargs["client_kwargs"] == {"region_name": "eu-west-1"}
    assert (kwargs["profile"], kwargs["endpoint_url"]) == ("prod", "http://127.0.0.1:1")


@pytest.mark.parametrize("key", ["AWS_SKIP_SIGNATURE", "request_payer", "AWS_FORCE_PATH_STYLE",
                                 "virtual_hosted_style_request"])
def test_a_switch_that_is_neither_on_nor_off_is_refused_naming_it(key):
    with pytest.raises(InvalidArgumentError, match=f"storage option {key}='maybe' must be true or false"):
        kwargs_for({key: "maybe"})


def test_an_unknown_addressing_style_is_refused():
    with pytest.raises(InvalidArgumentError, match="AWS_S3_ADDRESSING_STYLE='auto' must be 'path' or 'virtual'"):
        kwargs_for({"AWS_S3_ADDRESSING_STYLE": "auto"})


@pytest.mark.parametrize("options", [
    {"AWS_FORCE_PATH_STYLE": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"},
    {"AWS_S3_ADDRESSING_STYLE": "virtual", "aws_force_path_style": "1"},
    {"AWS_FORCE_PATH_STYLE": "true", "config_kwargs": {"s3": {"addressing_style": "virtual"}}},
])
def test_options_asking_for_different_addressing_styles_are_refused(options):
    with pytest.raises(InvalidArgumentError, match="different S3 addressing styles"):
        kwargs_for(options)


@pytest.mark.parametrize("options", [
    {"AWS_SKIP_SIGNATURE": "true", "skip_signature": "false"},
    {"AWS_SKIP_SIGNATURE": "true", "anon": False},
    {"requester_pays": True, "AWS_REQUEST_PAYER": "false"},
])
def test_switches_that_contradict_each_other_are_refused(options):
    with pytest.raises(InvalidArgumentError, match="contradict each other"):
        kwargs_for(options)
    agreeing = {k: ("true" if isinstance(v, str) else True) for k, v in options.items()}
    assert kwargs_for(agreeing)


@pytest.mark.parametrize("key", ["AWS_S3_LOCKING_PROVIDER", "aws_s3_locking_provider"])
def test_the_dynamodb_locking_provider_is_accepted_with_a_warning_and_not_passed_on(key):
    options = {key: "dynamodb", "DELTA_DYNAMO_TABLE_NAME": "delta_log", "delta_dynamo_table_name": "delta_log"}
    with pytest.warns(UserWarning, match="does not record its commits in the DynamoDB lock table"):
        kwargs = _s3_kwargs(options)
    assert kwargs == PLAIN


def test_the_lock_tables_own_settings_are_accepted_and_not_passed_on():
    """delta-rs reads DynamoDB's endpoint, region and credentials apart from S3's (and the lock
    table's billing mode and request deadline): one set of options opens a table in both, and
    none of them reaches s3fs, where a DynamoDB endpoint or key would replace S3's."""
    lock = {"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1", "AWS_REGION_DYNAMODB": "eu-west-1",
            "AWS_ACCESS_KEY_ID_DYNAMODB": "dynamo-key", "AWS_SECRET_ACCESS_KEY_DYNAMODB": "dynamo-secret",
            "AWS_SESSION_TOKEN_DYNAMODB": "dynamo-token", "DELTA_DYNAMO_BILLING_MODE": "PAY_PER_REQUEST",
            "DELTA_DYNAMO_MAX_ELAPSED_REQUEST_TIME": "60"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no provider named: nothing to warn about
        assert _s3_kwargs(dict(lock)) == PLAIN
        kwargs = _s3_kwargs({**lock, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "s3-key"})
    assert kwargs["key"] == "s3-key" and kwargs["client_kwargs"] == {"region_name": "us-east-1"}
    assert "dynamo" not in repr(kwargs).lower()


def test_the_lock_table_name_alone_is_accepted_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _s3_kwargs({"DELTA_DYNAMO_TABLE_NAME": "locks"}) == PLAIN


@pytest.mark.parametrize("provider", ["zookeeper", "", "true"])
def test_a_locking_provider_delta_rs_does_not_know_is_refused(provider):
    with pytest.raises(InvalidArgumentError, match="only locking provider delta-rs knows is 'dynamodb'"):
        _s3_kwargs({"AWS_S3_LOCKING_PROVIDER": provider})


def test_allow_unsafe_rename_stays_accepted_and_ignored():
    """deltatx's S3 commit is always a conditional PUT, so allowing an unsafe rename changes nothing."""
    for value in ("true", "false"):
        assert _s3_kwargs({"AWS_S3_ALLOW_UNSAFE_RENAME": value}) == PLAIN


def test_the_switch_words_include_object_stores_y_and_n():
    assert _switch("fsync", "Y") is True and _switch("fsync", "n") is False


def test_a_bad_option_is_refused_when_the_store_opens():
    with pytest.raises(InvalidArgumentError, match="AWS_SKIP_SIGNATURE='perhaps' must be true or false"):
        open_store("s3://bucket/t", {"endpoint_url": "http://127.0.0.1:1", "AWS_SKIP_SIGNATURE": "perhaps"})


@pytest.mark.s3
def test_a_table_round_trips_on_s3_with_deltalakes_options(s3_bucket):
    prefix, options = s3_bucket
    uri = f"{prefix}/rs-options"
    rs_options = {"AWS_ENDPOINT_URL": options["endpoint_url"], "AWS_ACCESS_KEY_ID": "testing",
                  "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
                  "AWS_FORCE_PATH_STYLE": "true", "AWS_REQUEST_PAYER": "true",
                  "AWS_S3_LOCKING_PROVIDER": "dynamodb", "DELTA_DYNAMO_TABLE_NAME": "delta_log"}
    schema = pa.schema([("id", pa.int64())])
    with pytest.warns(UserWarning, match="DynamoDB lock table"):
        table = deltatx.create_table(uri, schema, storage_options=rs_options)
        table.append(pa.table({"id": [1, 2, 3]}, schema=schema))
        store = open_store(uri, rs_options)
    client = store.fs.connect()  # botocore's client, configured from the translated options
    assert client.meta.config.s3["addressing_style"] == "path"
    assert store.fs.req_kw == {"RequestPayer": "requester"}
    assert store.fs.config_kwargs == {"s3": {"addressing_style": "path"}, **WAITS}
    # read back with object_store's spelling of the same style and with plain s3fs options
    again = {k: v for k, v in rs_options.items() if k != "AWS_FORCE_PATH_STYLE"}
    again["aws_virtual_hosted_style_request"] = "false"
    with pytest.warns(UserWarning):
        assert deltatx.Table(uri, storage_options=again).to_arrow()["id"].to_pylist() == [1, 2, 3]
    assert deltatx.Table(uri, storage_options=options).version == 1



@pytest.mark.parametrize("options, expected", [
    ({"timeout": "5s", "connect_timeout": "500ms"}, {"read_timeout": 5.0, "connect_timeout": 0.5}),
    ({"TIMEOUT": "2m"}, {"read_timeout": 120.0, "connect_timeout": 10.0}),
    ({"timeout": 3, "config_kwargs": {"read_timeout": 7}}, {"read_timeout": 7, "connect_timeout": 10.0}),
])
def test_delta_rs_timeouts_bound_botocores_waits(options, expected):
    waits = kwargs_for(options)["config_kwargs"]
    assert {k: waits[k] for k in expected} == expected


@pytest.mark.parametrize("value", ["soon", "-1s", "0", "", "inf"])
def test_a_bad_timeout_is_refused(value):
    with pytest.raises(InvalidArgumentError, match="timeout"):
        kwargs_for({"timeout": value})


@pytest.mark.parametrize("silent", [False, True], ids=["refused", "never answers"])
def test_an_endpoint_that_cannot_be_reached_is_a_typed_error_in_bounded_time(silent):
    """A closed port raised botocore's own exception (no OSError, no deltatx error); a port that
    accepts and never answers blocked for half an hour."""
    import socket
    import time

    from deltatx.errors import StorageUnavailableError

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    if silent:
        server.listen(64)  # the kernel accepts; nobody reads or answers
    else:
        server.close()
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "k", "secret": "s", "region": "us-east-1",
               "timeout": "200ms", "connect_timeout": "200ms"}
    started = time.monotonic()
    try:
        with pytest.raises(StorageUnavailableError, match=f"127.0.0.1:{port}") as info:
            deltatx.Table("s3://bucket/t", storage_options=options)
    finally:
        server.close()
    assert isinstance(info.value, OSError)
    assert time.monotonic() - started < 60


@pytest.mark.s3
def test_a_bucket_that_does_not_exist_is_named(s3_server):
    """Opening said "no _delta_log folder" and creating raised a plain FileNotFoundError."""
    from deltatx.errors import BucketNotFoundError, TableNotFoundError

    uri = "s3://no-such-bucket-deltatx/t"
    with pytest.raises(TableNotFoundError, match="bucket 'no-such-bucket-deltatx' does not exist"):
        deltatx.Table(uri, storage_options=s3_server)
    with pytest.raises(BucketNotFoundError, match="bucket 'no-such-bucket-deltatx' does not exist"):
        deltatx.create_table(uri, pa.schema([("id", pa.int64())]), storage_options=s3_server)
