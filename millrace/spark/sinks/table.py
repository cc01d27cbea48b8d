"""What a sink table looks like, independent of the database: columns, key, write mode.

A ``TableSpec`` is derived from the Spark schema of the DataFrame a sink query writes
(``table_spec``) and handed to a ``Database``, which creates the table and upserts batches
into it.  Column types are Spark's simple type names (``string``, ``bigint``,
``timestamp``, ``decimal(10,2)``, ...) mapped per dialect by ``sql_type``; complex types
(arrays, maps, structs) are refused: a sink table holds atomic values, so flatten them in
the transform.

Three write modes:

- ``latest`` (state sinks): one row per key, the one with the greatest ``order`` columns.
  Within a batch ``latest_per_key`` keeps the last row per key; in the database the upsert
  only replaces a row whose order columns are smaller, so a replayed or reordered batch
  never moves a row backwards.
- ``replace`` (aggregate sinks fed by Spark's stateful aggregation): the batch's row for a
  key replaces the stored one (Spark's state holds the running total).
- ``merge`` (aggregate sinks computed per micro-batch): the batch's partial aggregate is
  combined with the stored one column by column (``merge``: ``sum`` and ``count`` add,
  ``min`` and ``max`` keep the smaller or greater; a null side leaves the other).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from millrace.common.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

WriteMode = Literal["latest", "replace", "merge"]
MergeFunction = Literal["sum", "count", "min", "max"]
Dialect = Literal["sqlite", "postgresql"]

BATCHES_TABLE = "millrace_batches"
WATERMARKS_TABLE = "millrace_watermarks"
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

_INTEGERS = {"tinyint", "smallint", "int", "bigint"}
_SQLITE = {"string": "TEXT", "tinyint": "INTEGER", "smallint": "INTEGER", "int": "INTEGER",
           "bigint": "INTEGER", "boolean": "INTEGER", "float": "REAL", "double": "REAL",
           "timestamp": "TEXT", "timestamp_ntz": "TEXT", "date": "TEXT", "binary": "BLOB"}
_POSTGRES = {"string": "TEXT", "tinyint": "SMALLINT", "smallint": "SMALLINT",
             "int": "INTEGER", "bigint": "BIGINT", "boolean": "BOOLEAN", "float": "REAL",
             "double": "DOUBLE PRECISION", "timestamp": "TIMESTAMP WITH TIME ZONE",
             "timestamp_ntz": "TIMESTAMP", "date": "DATE", "binary": "BYTEA"}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")
_VARCHAR = re.compile(r"^(?:var)?char\(\d+\)$")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark's simple type name: "string", "bigint", "timestamp", "decimal(10,2)"


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    mode: WriteMode = "replace"
    order: tuple[str, ...] = ()  # latest mode: the greatest of these wins
    merge: tuple[tuple[str, MergeFunction], ...] = ()  # merge mode: (column, function)

    def __post_init__(self) -> None:
        check_table_name(self.name)
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError(f"table {self.name}: duplicate column(s) {', '.join(dup)}")
        if not self.key:
            raise ConfigError(f"table {self.name}: a key (primary key columns) is required")
        for role, cols in (("key", self.key), ("order", self.order)):
            unknown = [c for c in cols if c not in names]
            if unknown:
                raise ConfigError(f"table {self.name}: {role} column(s) {', '.join(unknown)} "
                                  f"not among the columns ({', '.join(names)})")
        if self.mode == "latest" and not self.order:
            raise ConfigError(f"table {self.name}: latest mode needs order columns")
        if self.mode == "merge":
            merged = [c for c, _ in self.merge]
            if sorted(merged) != sorted(self.value_columns):
                raise ConfigError(f"table {self.name}: merge mode needs one function per "
                                  f"value column ({', '.join(self.value_columns)}), got "
                                  f"{', '.join(merged) or 'none'}")

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def value_columns(self) -> list[str]:
        """The columns an upsert updates: all but the key."""
        return [c.name for c in self.columns if c.name not in self.key]


def check_table_name(name: str) -> str:
    if not TABLE_NAME.match(name):
        raise ConfigError(f"table name {name!r} must be a plain SQL identifier "
                          "(letters, digits, underscores; not starting with a digit)")
    if name in (BATCHES_TABLE, WATERMARKS_TABLE):
        raise ConfigError(f"table name {name!r} is reserved for the pipeline's own records")
    return name


def quote(identifier: str) -> str:
    """A double-quoted SQL identifier (both dialects): ``offset`` -> ``"offset"``."""
    return '"' + identifier.replace('"', '""') + '"'


def sql_type(spark_type: str, dialect: Dialect) -> str:
    """The column type for a Spark simple type name in ``dialect``."""
    mapping = _SQLITE if dialect == "sqlite" else _POSTGRES
    if spark_type in mapping:
        return mapping[spark_type]
    decimal = _DECIMAL.match(spark_type)
    if decimal:
        return "NUMERIC" if dialect == "sqlite" else f"NUMERIC({decimal[1]},{decimal[2]})"
    if _VARCHAR.match(spark_type):
        return "TEXT"
    raise ConfigError(f"type {spark_type} cannot be stored in a sink table (atomic types "
                      "only: flatten arrays, maps and structs in the transform)")


def columns_from_spark(schema: StructType, table: str) -> tuple[Column, ...]:
    """The sink columns of a Spark schema; complex types are refused with the column named."""
    columns = []
    for field in schema.fields:
        name = field.dataType.simpleString()
        try:
            sql_type(name, "postgresql")
        except ConfigError:
            raise ConfigError(f"table {table}: column {field.name} has type {name}, which a "
                              "sink table cannot hold (flatten arrays, maps and structs in "
                              "the transform)") from None
        columns.append(Column(field.name, name))
    return tuple(columns)


def is_integer(spark_type: str) -> bool:
    return spark_type in _INTEGERS


# ------------------------------------------------------------------ batches in Arrow


def latest_per_key(rows: pa.Table, key: Sequence[str], order: Sequence[str]) -> pa.Table:
    """The last row per key by ``order`` (ascending; a null order value loses), rows with a
    null key column dropped.  Vectorised: sort by key then order, keep each key's last row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    valid = None
    for name in key:
        column_valid = pc.is_valid(rows[name])
        valid = column_valid if valid is None else pc.and_(valid, column_valid)
    if valid is not None and rows.num_rows and pc.sum(valid).as_py() != rows.num_rows:
        rows = rows.filter(valid)
    n = rows.num_rows
    if n < 2:
        return rows
    if int(pa.__version__.split(".")[0]) >= 25:  # null placement per sort key since 25
        rows = rows.sort_by([(k, "ascending", "at_start") for k in (*key, *order)])
    else:
        rows = rows.sort_by([(k, "ascending") for k in (*key, *order)],
                            null_placement="at_start")
    last = None
    for name in key:
        column = rows[name].combine_chunks()
        differs = pc.not_equal(column.slice(0, n - 1), column.slice(1))
        last = differs if last is None else pc.or_(last, differs)
    assert last is not None
    mask = pa.concat_arrays([last, pa.array([True])])
    return rows.filter(mask)


def conform(rows: pa.Table, spec: TableSpec) -> pa.Table:
    """``rows`` with exactly the spec's columns in the spec's order."""
    missing = [c for c in spec.column_names if c not in rows.column_names]
    if missing:
        raise ConfigError(f"table {spec.name}: batch lacks column(s) {', '.join(missing)}")
    return rows.select(spec.column_names)
