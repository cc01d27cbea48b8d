"""``millrace schemas list|get|versions|register|check|delete|config|mode``: a schema
registry's subjects, versions, compatibility and mode, over Confluent's REST API (any
Confluent-compatible registry; ``millrace schema-registry`` runs one).

    millrace schemas [--schema-registry URL] [--user-info USER:PASS] [--ca-file F] ACTION ...

The registry options may come before or after the action.  ``--schema-registry``
defaults to ``$MILLRACE_SCHEMA_REGISTRY``, else ``http://localhost:8081``.  A schema file's
type comes from its extension (``.avsc`` Avro, ``.json`` JSON Schema, ``.proto`` Protobuf
text, ``.desc``/``.pb``/``.protoset`` a compiled FileDescriptorSet -- its last file is the
schema) unless ``--type`` says.  An error answer of the registry is one line with its
message and Confluent's error code (``Error: Subject 'x' not found. (HTTP status code 404,
SR code 40401)``), exit code 1; ``check`` exits 1 when the schema is incompatible, after
printing the registry's reasons.

``registry_options`` and ``registry_client`` serve ``produce`` and ``consume`` too
(``millrace.cli.console``), with the options named ``--schema-registry-*`` there.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from typing import TYPE_CHECKING, Any

from millrace.cli.common import CommandError, format_table, print_json

if TYPE_CHECKING:
    from millrace.client.schema_registry import Schema, SchemaReference
    from millrace.client.schema_registry.client import SchemaRegistryClient

REGISTRY_ENV = "MILLRACE_SCHEMA_REGISTRY"
DEFAULT_REGISTRY = "http://localhost:8081"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
EXTENSIONS = {".avsc": "AVRO", ".json": "JSON", ".proto": "PROTOBUF", ".desc": "PROTOBUF",
              ".pb": "PROTOBUF", ".protoset": "PROTOBUF", ".binpb": "PROTOBUF"}
_DESCRIPTOR_SETS = (".desc", ".pb", ".protoset", ".binpb")
LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


# ---------------------------------------------------------------------- options
def registry_options(prefixed: bool = False, suppress: bool = False
                     ) -> argparse.ArgumentParser:
    """A parent parser with ``--schema-registry URL``, ``--user-info``, ``--ca-file``
    (``prefixed``: ``--schema-registry-user-info``, ``--schema-registry-ca-file``, for
    commands that also talk to Kafka).  ``suppress``: no defaults (the options repeated
    after a subcommand must not overwrite those given before it)."""
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("schema registry")
    group.add_argument("--schema-registry", "--schema-registry-url", dest="schema_registry",
                       metavar="URL",
                       default=default(os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY),
                       help=f"the registry's URL, or several comma-separated (default: "
                            f"${REGISTRY_ENV} or {DEFAULT_REGISTRY})")
    prefix = "--schema-registry-" if prefixed else "--"
    group.add_argument(f"{prefix}user-info", dest="registry_user_info", metavar="USER:PASS",
                       default=default(None), help="basic authentication with the registry")
    group.add_argument(f"{prefix}ca-file", dest="registry_ca_file", metavar="FILE",
                       default=default(None),
                       help="CA certificates (PEM) to verify an https registry with")
    return parent


def registry_client(args: argparse.Namespace) -> SchemaRegistryClient:
    from millrace.client.schema_registry.client import SchemaRegistryClient

    conf: dict[str, Any] = {"url": args.schema_registry}
    if getattr(args, "registry_user_info", None):
        if ":" not in args.registry_user_info:
            raise CommandError("the registry's user info must be USER:PASSWORD")
        conf["basic.auth.credentials.source"] = "USER_INFO"
        conf["basic.auth.user.info"] = args.registry_user_info
    if getattr(args, "registry_ca_file", None):
        if not os.path.isfile(args.registry_ca_file):
            raise CommandError(f"cannot read the CA file {args.registry_ca_file}")
        conf["ssl.ca.location"] = args.registry_ca_file
    return SchemaRegistryClient(conf)


def schema_type_of(path: str, given: str | None, option: str) -> str:
    if given:
        return given.upper()
    extension = os.path.splitext(path)[1].lower()
    if extension not in EXTENSIONS:
        raise CommandError(f"{option} {path}: cannot tell the schema type from the extension "
                           f"{extension or '(none)'}; give the type (AVRO, JSON or PROTOBUF)")
    return EXTENSIONS[extension]


def read_schema_file(path: str, schema_type: str | None = None,
                     references: tuple[SchemaReference, ...] = (),
                     option: str = "--schema-file") -> Schema:
    """The ``Schema`` of a file; ``CommandError`` naming the file when unreadable."""
    from millrace.client.schema_registry import Schema

    kind = schema_type_of(path, schema_type, option)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise CommandError(f"cannot read {option} {path}: {e.strerror}") from None
    if kind == "PROTOBUF" and path.lower().endswith(_DESCRIPTOR_SETS):
        return Schema(_descriptor_set_file(raw, path, option), kind, references)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"{option} {path}: not UTF-8 text") from None
    if not text.strip():
        raise CommandError(f"{option} {path} is empty")
    return Schema(text, kind, references)


def _descriptor_set_file(raw: bytes, path: str, option: str) -> str:
    """base64 of the last file of a FileDescriptorSet (``protoc --descriptor_set_out``
    writes the named file after its imports)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(raw)
    except DecodeError:
        files = descriptor_pb2.FileDescriptorSet()
    if not files.file:
        raise CommandError(f"{option} {path}: not a FileDescriptorSet (protoc "
                           "--descriptor_set_out)")
    return base64.standard_b64encode(files.file[-1].SerializeToString()).decode("ascii")


def parse_reference(item: str) -> SchemaReference:
    """``name=subject:version`` -> ``SchemaReference``."""
    from millrace.client.schema_registry import SchemaReference

    name, sep, target = item.partition("=")
    subject, colon, version = target.rpartition(":")
    if not sep or not name.strip() or not colon or not subject:
        raise CommandError(f"--reference expects name=subject:version, got {item!r}")
    try:
        number = int(version)
    except ValueError:
        raise CommandError(f"--reference {item!r}: the version must be a number") from None
    return SchemaReference(name.strip(), subject, number)


def _version_arg(text: str) -> str:
    if text == "latest" or text == "-1":
        return "latest"
    try:
        if int(text) > 0:
            return str(int(text))
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected a version number or latest, got {text!r}")


# ---------------------------------------------------------------------- register
def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--output", "-o", choices=("table", "json"), default=argparse.SUPPRESS,
                     help="output format (default table)")
    after = [registry_options(suppress=True), out]
    p = sub.add_parser("schemas", parents=[registry_options()],
                       help="subjects, versions, compatibility and mode of a schema registry",
                       description="Look at and change a Confluent-compatible schema "
                                   "registry: subjects, versions, compatibility checks, "
                                   "deletes, compatibility levels and modes.")
    p.add_argument("--output", "-o", choices=("table", "json"), default="table",
                   help="output format (default table)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    a = actions.add_parser("list", parents=after, help="list subjects")
    a.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    a.add_argument("--prefix", help="only subjects starting with this")
    a.set_defaults(func=list_)

    a = actions.add_parser("get", parents=after, help="a subject's version, or a schema by id")
    a.add_argument("subject", nargs="?", help="the subject")
    a.add_argument("--version", type=_version_arg, default="latest",
                   help="a version number or latest (default)")
    a.add_argument("--id", type=int, help="the schema with this id (instead of a subject)")
    a.set_defaults(func=get)

    a = actions.add_parser("versions", parents=after, help="a subject's versions and ids")
    a.add_argument("subject")
    a.add_argument("--deleted", action="store_true", help="include soft-deleted versions")
    a.set_defaults(func=versions)

    a = actions.add_parser("register", parents=after,
                           help="register a schema under a subject (a new version if new)")
    a.add_argument("subject")
    a.add_argument("--schema-file", required=True, metavar="FILE",
                   help="the schema (.avsc, .json, .proto, or a protoc descriptor set)")
    a.add_argument("--type", type=str.upper, choices=SCHEMA_TYPES,
                   help="the schema type (default: from the file's extension)")
    a.add_argument("--reference", action="append", metavar="NAME=SUBJECT:VERSION",
                   help="a schema this one uses, registered as SUBJECT (repeatable)")
    a.add_argument("--normalize", action="store_true",
                   help="ask the registry to normalize the schema first")
    a.set_defaults(func=register_)

    a = actions.add_parser("check", parents=after,
                           help="is a schema compatible with a subject's version(s)")
    a.add_argument("subject")
    a.add_argument("--schema-file", required=True, metavar="FILE")
    a.add_argument("--type", type=str.upper, choices=SCHEMA_TYPES,
                   help="the schema type (default: from the file's extension)")
    a.add_argument("--reference", action="append", metavar="NAME=SUBJECT:VERSION",
                   help="a schema this one uses (repeatable)")
    a.add_argument("--version", type=_version_arg, default="latest",
                   help="check against this version (default latest; the subject's "
                        "compatibility level says which others count)")
    a.set_defaults(func=check)

    a = actions.add_parser("delete", parents=after, help="delete a subject or one version")
    a.add_argument("subject")
    a.add_argument("--version", type=_version_arg, help="only this version")
    a.add_argument("--permanent", action="store_true",
                   help="delete for good (only what was soft-deleted before)")
    a.set_defaults(func=delete)

    a = actions.add_parser("config", parents=after,
                           help="the compatibility level, global or of a subject")
    a.add_argument("subject", nargs="?", help="the subject (default: the global level)")
    change = a.add_mutually_exclusive_group()
    change.add_argument("--set", type=str.upper, choices=LEVELS, metavar="LEVEL",
                        help=f"set it: {', '.join(LEVELS)}")
    change.add_argument("--delete", action="store_true",
                        help="remove the subject's own level (back to the global one)")
    a.set_defaults(func=config)

    a = actions.add_parser("mode", parents=after, help="the mode, global or of a subject")
    a.add_argument("subject", nargs="?", help="the subject (default: the global mode)")
    a.add_argument("--set", type=str.upper, choices=MODES, metavar="MODE",
                   help=f"set it: {', '.join(MODES)}")
    a.add_argument("--force", action="store_true",
                   help="with --set IMPORT: even when subjects exist")
    a.set_defaults(func=mode)


# ---------------------------------------------------------------------- helpers

def _quote(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text, safe="")


def _references(items: list[str] | None) -> tuple[SchemaReference, ...]:
    return tuple(parse_reference(item) for item in items or ())


def _show_schema(schema: Schema) -> str:
    """The schema text, JSON pretty-printed (a protobuf descriptor stays base64)."""
    if schema.schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema.schema_str), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return schema.schema_str


def _registered_json(subject: str | None, version: int | None, schema_id: int,
                     schema: Schema) -> dict[str, Any]:
    return {"subject": subject, "version": version, "id": schema_id,
            "schemaType": schema.schema_type, "schema": schema.schema_str,
            "references": [r.to_json() for r in schema.references]}


# ---------------------------------------------------------------------- actions
def list_(args: argparse.Namespace) -> int:
    query = []
    if args.deleted:
        query.append("deleted=true")
    if args.prefix:
        query.append(f"subjectPrefix={_quote(args.prefix)}")
    path = "subjects" + ("?" + "&".join(query) if query else "")
    subjects = [str(s) for s in registry_client(args).request("GET", path)]
    if args.output == "json":
        print_json(subjects)
    else:
        for subject in subjects:
            print(subject)
    return 0


def get(args: argparse.Namespace) -> int:
    client = registry_client(args)
    if args.id is not None:
        if args.subject is not None:
            raise CommandError("give a subject or --id, not both")
        schema = client.get_schema(args.id)
        used = client.request("GET", f"schemas/ids/{args.id}/versions")
        if args.output == "json":
            print_json({**_registered_json(None, None, args.id, schema),
                        "versions": used})
            return 0
        where = ", ".join(f"{u['subject']} version {u['version']}" for u in used) or "-"
        print(f"Id: {args.id}\tType: {schema.schema_type}\tUsed by: {where}")
    else:
        if args.subject is None:
            raise CommandError("give a subject, or --id")
        registered = client.get_version(args.subject, args.version)
        schema = registered.schema
        if args.output == "json":
            print_json(_registered_json(registered.subject, registered.version,
                                        registered.id, schema))
            return 0
        print(f"Subject: {registered.subject}\tVersion: {registered.version}\t"
              f"Id: {registered.id}\tType: {schema.schema_type}")
    for ref in schema.references:
        print(f"Reference: {ref.name} = {ref.subject} version {ref.version}")
    print(_show_schema(schema))
    return 0


def versions(args: argparse.Namespace) -> int:
    client = registry_client(args)
    path = f"subjects/{_quote(args.subject)}/versions" + ("?deleted=true" if args.deleted
                                                          else "")
    rows = []
    for number in client.request("GET", path):
        registered = client.get_version(args.subject, int(number), deleted=args.deleted)
        rows.append({"version": registered.version, "id": registered.id,
                     "schemaType": registered.schema.schema_type})
    if args.output == "json":
        print_json(rows)
    else:
        print(format_table(["VERSION", "ID", "TYPE"],
                           [[r["version"], r["id"], r["schemaType"]] for r in rows]))
    return 0


def register_(args: argparse.Namespace) -> int:
    schema = read_schema_file(args.schema_file, args.type, _references(args.reference))
    client = registry_client(args)
    schema_id = client.register_schema(args.subject, schema, normalize=args.normalize)
    version = client.lookup_schema(args.subject, schema, normalize=args.normalize).version
    if args.output == "json":
        print_json({"subject": args.subject, "version": version, "id": schema_id})
    else:
        print(f"Registered {args.subject} version {version} (schema id {schema_id}).")
    return 0


def check(args: argparse.Namespace) -> int:
    schema = read_schema_file(args.schema_file, args.type, _references(args.reference))
    result = registry_client(args).test_compatibility_verbose(args.subject, schema,
                                                              args.version)
    if args.output == "json":
        print_json({"subject": args.subject, "version": args.version,
                    "is_compatible": result.is_compatible, "messages": list(result.messages)})
    elif result.is_compatible:
        print(f"compatible with {args.subject} version {args.version}")
    else:
        print(f"incompatible with {args.subject} version {args.version}:")
        for message in result.messages or ("(the registry gave no reason)",):
            print(f"  - {' '.join(str(message).split())}")
    return 0 if result.is_compatible else 1


def delete(args: argparse.Namespace) -> int:
    client = registry_client(args)
    kind = "permanently" if args.permanent else "soft"
    if args.version is not None:
        deleted = [client.delete_version(args.subject, args.version, args.permanent)]
    else:
        deleted = client.delete_subject(args.subject, args.permanent)
    if args.output == "json":
        print_json({"subject": args.subject, "versions": deleted,
                    "permanent": args.permanent})
    else:
        print(f"Deleted {args.subject} version(s) {', '.join(map(str, deleted))} ({kind}).")
    return 0


def config(args: argparse.Namespace) -> int:
    from millrace.client.schema_registry.client import SchemaRegistryError

    client = registry_client(args)
    subject = args.subject
    where = f"subject {subject}" if subject is not None else "global"
    inherited = False
    if args.set:
        level = client.set_compatibility(subject, args.set)
        done = f"Set the compatibility level ({where}) to {level}."
    elif args.delete:
        path = f"config/{_quote(subject)}" if subject is not None else "config"
        body = client.request("DELETE", path)
        level = str(body.get("compatibilityLevel") or body.get("compatibility"))
        done = f"Deleted the compatibility level ({where}); it was {level}."
    else:
        try:
            level = client.get_compatibility(subject)
        except SchemaRegistryError as e:
            if subject is None or e.error_code != 40408:  # the subject has no level of its own
                raise
            level, inherited = client.get_compatibility(None), True
        done = f"{level} ({where}{', from the global level' if inherited else ''})"
    if args.output == "json":
        print_json({"subject": subject, "compatibility": level, "global": inherited
                    or subject is None})
    else:
        print(done)
    return 0


def mode(args: argparse.Namespace) -> int:
    client = registry_client(args)
    subject = args.subject
    where = f"subject {subject}" if subject is not None else "global"
    if args.set:
        value = client.set_mode(args.set, subject, force=args.force)
        done = f"Set the mode ({where}) to {value}."
    else:
        if args.force:
            raise CommandError("--force goes with --set")
        path = f"mode/{_quote(subject)}?defaultToGlobal=true" if subject is not None \
            else "mode"
        value = str(client.request("GET", path)["mode"])
        done = f"{value} ({where})"
    if args.output == "json":
        print_json({"subject": subject, "mode": value})
    else:
        print(done)
    return 0
