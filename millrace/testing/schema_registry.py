"""``SchemaRegistryProcess`` for tests and benchmarks (the launcher is library code:
``millrace.launcher.schema_registry_process``)."""

from millrace.launcher.schema_registry_process import SchemaRegistryProcess

__all__ = ["SchemaRegistryProcess"]
