"""Transitional alias: ``broker/handlers/group.py`` still imports ``Errors`` from here.

The group coordinator's own enum is gone; this is ``millrace.common.errors.Errors``, the
one table, under its old import path for that single caller.  Delete this module once
the handler imports ``millrace.common.errors`` (issue 12); nothing else may import it.
"""

from millrace.common.errors import Errors

__all__ = ["Errors"]
