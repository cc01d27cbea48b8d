/*
 * The C interface that millrace.record._speedups exports to other extensions, as the
 * capsule millrace.record._speedups._C_API.  A user imports the module, then
 *
 *     const MillraceRecordCAPI *api = PyCapsule_Import(MILLRACE_RECORD_CAPSULE, 0);
 *
 * and checks api->version.  Everything runs with the GIL held.
 */
#ifndef MILLRACE_RECORD_CAPI_H
#define MILLRACE_RECORD_CAPI_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MILLRACE_RECORD_CAPSULE "millrace.record._speedups._C_API"
#define MILLRACE_RECORD_CAPI_VERSION 1

typedef struct {
    int version;
    /* Append one v2 record (default_record.encode_record's layout and errors) to the
     * bytearray out; returns its size, or -1 with an exception set. */
    Py_ssize_t (*encode_record)(PyObject *out, int32_t offset_delta, int64_t timestamp_delta,
                                PyObject *key, PyObject *value, PyObject *headers);
} MillraceRecordCAPI;

/* MILLRACE_NO_SPEEDUPS set to anything but "" or "0" refuses every millrace accelerator,
 * so the pure-Python code runs: 1 with ImportError set for `module`, else 0. */
static inline int
millrace_speedups_refused(const char *module)
{
    const char *off = getenv("MILLRACE_NO_SPEEDUPS");
    if (off != NULL && off[0] != '\0' && strcmp(off, "0") != 0) {
        PyErr_Format(PyExc_ImportError, "%s disabled by MILLRACE_NO_SPEEDUPS", module);
        return 1;
    }
    return 0;
}

#endif
