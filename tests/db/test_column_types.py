"""The column types' fast reads from SQLite's text (tessera.models.base) give what the general
ones give, for every form the text can take."""

import copy
import pickle
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import TypeDecorator
from sqlalchemy.dialects import postgresql, sqlite

from tessera.models.base import UTCDateTime, Uuid

SQLITE = sqlite.dialect()


def _reader(column_type, dialect=SQLITE):
    return column_type.dialect_impl(dialect).result_processor(dialect, None)


def test_a_uuid_read_from_sqlite_is_a_whole_uuid():
    read = _reader(Uuid())
    for value in (uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)):
        made = read(value.hex)
        assert made == value and hash(made) == hash(value) and str(made) == str(value)
        assert made.is_safe is uuid.SafeUUID.unknown and made.version == value.version
        assert pickle.loads(pickle.dumps(made)) == value  # noqa: S301 (its own bytes)
        assert copy.deepcopy(made) == value
        assert {made: 1}[value] == 1
    assert read(None) is None
    spelled = uuid.uuid4()
    assert read(str(spelled)) == spelled  # another spelling goes the general way
    with pytest.raises(ValueError):
        read("z" * 32)


def test_a_timestamp_read_from_sqlite_is_the_general_one():
    column_type = UTCDateTime().dialect_impl(SQLITE)
    read = _reader(column_type)
    general = TypeDecorator.result_processor(column_type, SQLITE, None)
    for text in (
        "2026-11-23 20:34:32.054460",
        "2026-11-23 20:34:32",
        "2026-01-01 00:00:00.000001",
        "2026-11-23 20:34:32+01:00",  # not as SQLAlchemy writes it: the general way
    ):
        assert read(text) == general(text) and read(text).tzinfo is UTC
    assert read("2026-11-23 20:34:32.054460") == datetime(2026, 11, 23, 20, 34, 32, 54460, UTC)
    assert read(None) is None


def test_postgresql_reads_are_the_general_ones():
    dialect = postgresql.dialect()
    assert _reader(Uuid(), dialect) is None  # asyncpg gives UUIDs
    now = datetime.now(UTC)
    assert _reader(UTCDateTime(), dialect)(now) == now
