"""The registry's errors, each with Confluent's HTTP status and ``error_code`` (the body is
``{"error_code": ..., "message": ...}``)."""

from __future__ import annotations


class RegistryError(Exception):
    http_status = 500
    error_code = 50001

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


class SubjectNotFound(RegistryError):
    http_status, error_code = 404, 40401


class VersionNotFound(RegistryError):
    http_status, error_code = 404, 40402


class SchemaNotFound(RegistryError):
    http_status, error_code = 404, 40403


class SubjectSoftDeleted(RegistryError):
    http_status, error_code = 404, 40404


class SubjectNotSoftDeleted(RegistryError):
    http_status, error_code = 404, 40405


class VersionSoftDeleted(RegistryError):
    http_status, error_code = 404, 40406


class VersionNotSoftDeleted(RegistryError):
    http_status, error_code = 404, 40407


class SubjectLevelConfigNotFound(RegistryError):
    http_status, error_code = 404, 40408


class SubjectLevelModeNotFound(RegistryError):
    http_status, error_code = 404, 40409


class IncompatibleSchema(RegistryError):
    http_status, error_code = 409, 409


class InvalidSchema(RegistryError):
    http_status, error_code = 422, 42201


class InvalidVersion(RegistryError):
    http_status, error_code = 422, 42202


class InvalidCompatibilityLevel(RegistryError):
    http_status, error_code = 422, 42203


class InvalidMode(RegistryError):
    http_status, error_code = 422, 42204


class OperationNotPermitted(RegistryError):
    http_status, error_code = 422, 42205


class ReferenceExists(RegistryError):
    http_status, error_code = 422, 42206


class BadRequest(RegistryError):
    http_status, error_code = 400, 400


class StoreError(RegistryError):
    http_status, error_code = 500, 50001


class StoreTimeout(RegistryError):
    http_status, error_code = 500, 50002


class ForwardingError(RegistryError):
    http_status, error_code = 500, 50003


class UnknownLeader(RegistryError):
    http_status, error_code = 500, 50004
