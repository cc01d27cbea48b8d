/*
 * Optional C accelerator for the v2 record codec (millrace.record._speedups).
 *
 * The pure-Python functions in default_record.py are the reference: these two functions
 * produce the same bytes, the same objects and the same errors (type and message), which
 * tests/unit/record/test_speedups.py checks with hypothesis.  The record layout is the one
 * described at the top of default_record.py:
 *
 *     length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *     keyLength varint | key | valueLength varint | value | headerCount varint |
 *     (headerKeyLength varint, key, headerValueLength varint, value)*
 *
 * Varints are zig-zag, 7 bits per byte, least significant group first.
 *
 * Safety: every byte read is bounds-checked against the buffer; lengths are compared with
 * the bytes left in the record before anything is copied; no allocation is sized by an
 * untrusted number except the result list, whose length the caller's count bounds (at most
 * one entry per 7 bytes of input, checked first).  Errors raise
 * millrace.common.errors.CorruptBatchError exactly where the Python decoder raises it.
 *
 * Setting MILLRACE_NO_SPEEDUPS to anything but "" or "0" makes the import fail, so the
 * package falls back to the pure-Python codec.
 *
 * Not thread-specific: everything runs with the GIL held; the input buffer is held
 * (buffer protocol) while objects are built, so a bytearray cannot be resized under us.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "millrace_record_capi.h"

static PyObject *CorruptBatchError;   /* millrace.common.errors.CorruptBatchError */
static PyObject *empty_tuple;

#define MIN_RECORD_SIZE 7
#define PER_RECORD_FIELDS 7  /* offset, timestamp, key, value, headers, key size, value size */
#define MAX_FIELDS 32

/* Python's floor division (the reference uses //, C's / truncates). */
static Py_ssize_t
floor_div(Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

static int64_t
zigzag(uint64_t raw)
{
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}

/* The reference's IndexError: a read past the end of the data. */
static int
runs_past(void)
{
    PyErr_SetString(CorruptBatchError, "record runs past the end of the batch");
    return -1;
}

/* varint._decode: the general (multi-byte) decoder with its three errors. */
static int
decode_slow(const uint8_t *d, Py_ssize_t len, Py_ssize_t pos, int max_bytes, int bits,
            const char *what, int64_t *out, Py_ssize_t *next)
{
    uint64_t raw = 0;
    int overflow = 0;
    int shift = 0;
    Py_ssize_t i = pos;
    Py_ssize_t limit = pos + max_bytes;
    for (;;) {
        if (i >= len) {
            PyErr_Format(CorruptBatchError,
                         "%s at position %zd runs past the end of the buffer", what, pos);
            return -1;
        }
        uint8_t b = d[i++];
        uint64_t part = b & 0x7F;
        if (shift > 57) {
            if (part >> (64 - shift))
                overflow = 1;
        }
        if (shift < 64)
            raw |= part << shift;
        if (b < 0x80)
            break;
        if (i == limit) {
            PyErr_Format(CorruptBatchError, "%s at position %zd is longer than %d bytes",
                         what, pos, max_bytes);
            return -1;
        }
        shift += 7;
    }
    if (overflow || (bits < 64 && (raw >> bits))) {
        PyErr_Format(CorruptBatchError, "%s at position %zd does not fit in %d bits",
                     what, pos, bits);
        return -1;
    }
    *out = zigzag(raw);
    *next = i;
    return 0;
}

/* A varint (bits 32) or varlong (bits 64) at *pi, with the reference's inline fast paths:
 * one byte always; two bytes when inline2 (its record-field reads), where reading the
 * second byte past the end is its IndexError. */
static int
read_varint(const uint8_t *d, Py_ssize_t len, Py_ssize_t *pi, int64_t *out, int bits,
            int inline2)
{
    Py_ssize_t i = *pi;
    if (i >= len)
        return runs_past();
    uint8_t b = d[i];
    if (b < 0x80) {
        *out = zigzag(b);
        *pi = i + 1;
        return 0;
    }
    if (inline2) {
        if (i + 1 >= len)
            return runs_past();
        uint8_t b2 = d[i + 1];
        if (b2 < 0x80) {
            *out = zigzag((uint64_t)(b & 0x7F) | ((uint64_t)b2 << 7));
            *pi = i + 2;
            return 0;
        }
    }
    if (bits == 32)
        return decode_slow(d, len, i, 5, 32, "varint", out, pi);
    return decode_slow(d, len, i, 10, 64, "varlong", out, pi);
}

/* ------------------------------------------------------------------ object building */

typedef struct {
    PyTypeObject *cls;
    Py_ssize_t n;                       /* number of names (7 per-record + constants) */
    PyObject *names[MAX_FIELDS];        /* borrowed; NULL = skip */
    PyObject *descr[MAX_FIELDS];        /* owned data descriptors, or NULL: generic setattr */
    Py_ssize_t slot[MAX_FIELDS];        /* > 0: offset of a __slots__ member in cls */
    PyObject *const *constants;         /* borrowed, n - 7 of them */
} Shape;

static void
shape_clear(Shape *s)
{
    for (Py_ssize_t k = 0; k < s->n; k++)
        Py_CLEAR(s->descr[k]);
}

static int
shape_init(Shape *s, PyObject *cls, PyObject *fields, PyObject *constants)
{
    memset(s, 0, sizeof(*s));
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a class");
        return -1;
    }
    if (!PyTuple_Check(fields) || !PyTuple_Check(constants)) {
        PyErr_SetString(PyExc_TypeError, "fields and constants must be tuples");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    if (n < PER_RECORD_FIELDS || n > MAX_FIELDS
            || PyTuple_GET_SIZE(constants) != n - PER_RECORD_FIELDS) {
        PyErr_Format(PyExc_ValueError,
                     "fields needs %d per-record names plus one per constant (at most %d)",
                     PER_RECORD_FIELDS, MAX_FIELDS);
        return -1;
    }
    s->cls = (PyTypeObject *)cls;
    if (s->cls->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError, "cls cannot be instantiated");
        return -1;
    }
    s->n = n;
    s->constants = &PyTuple_GET_ITEM(constants, 0);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyTuple_GET_ITEM(fields, k);
        if (name == Py_None)
            continue;
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "field names must be str or None");
            shape_clear(s);
            return -1;
        }
        s->names[k] = name;
        PyObject *d = PyObject_GetAttr(cls, name);
        if (d == NULL) {
            PyErr_Clear();  /* no class attribute: plain instance attribute */
        }
        else if (Py_TYPE(d)->tp_descr_set != NULL) {
            s->descr[k] = d;  /* e.g. a __slots__ member */
            /* A __slots__ member of cls itself: the object is new (every slot NULL), so
             * shape_set can store into it directly, as the descriptor would. */
            if (Py_IS_TYPE(d, &PyMemberDescr_Type)
                    && ((PyDescrObject *)d)->d_type == s->cls) {
                PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
                if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset > 0)
                    s->slot[k] = m->offset;
            }
        }
        else {
            Py_DECREF(d);
        }
    }
    return 0;
}

/* Set field k of obj to value (a new reference, always consumed). */
static int
shape_set(Shape *s, PyObject *obj, Py_ssize_t k, PyObject *value)
{
    int rc = 0;
    if (value == NULL)
        return -1;
    if (s->slot[k] > 0) {
        PyObject **field = (PyObject **)((char *)obj + s->slot[k]);
        Py_XSETREF(*field, value);  /* the reference moves into the object */
        return 0;
    }
    if (s->names[k] != NULL) {
        PyObject *d = s->descr[k];
        if (d != NULL)
            rc = Py_TYPE(d)->tp_descr_set(d, obj, value);
        else
            rc = PyObject_SetAttr(obj, s->names[k], value);
    }
    Py_DECREF(value);
    return rc;
}

static PyObject *
add_int64(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return PyLong_FromLongLong(r);
    PyObject *x = PyLong_FromLongLong(a);
    PyObject *y = PyLong_FromLongLong(b);
    PyObject *sum = (x && y) ? PyNumber_Add(x, y) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return sum;
}

/* default_record._decode_headers; *pi is at a non-zero header-count byte. */
static PyObject *
decode_headers(const uint8_t *d, Py_ssize_t len, Py_ssize_t *pi, Py_ssize_t rec_end)
{
    int64_t count, n;
    Py_ssize_t i = *pi;
    if (read_varint(d, len, &i, &count, 32, 0) < 0)
        return NULL;
    if (count < 0 || count > floor_div(rec_end - i, 2)) {
        PyErr_Format(CorruptBatchError, "invalid header count %lld", (long long)count);
        return NULL;
    }
    PyObject *headers = PyList_New(0);
    if (headers == NULL)
        return NULL;
    for (int64_t h = 0; h < count; h++) {
        if (read_varint(d, len, &i, &n, 32, 0) < 0)
            goto fail;
        if (n < 0 || n > rec_end - i) {
            PyErr_Format(CorruptBatchError, "invalid header key length %lld", (long long)n);
            goto fail;
        }
        PyObject *name = PyUnicode_DecodeUTF8((const char *)d + i, (Py_ssize_t)n, "strict");
        if (name == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                PyErr_SetString(CorruptBatchError, "header key is not valid UTF-8");
            }
            goto fail;
        }
        i += (Py_ssize_t)n;
        if (read_varint(d, len, &i, &n, 32, 0) < 0) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *value;
        if (n < 0) {
            if (n != -1) {
                Py_DECREF(name);
                PyErr_Format(CorruptBatchError, "invalid header value length %lld",
                             (long long)n);
                goto fail;
            }
            value = Py_NewRef(Py_None);
        }
        else if (n > rec_end - i) {
            Py_DECREF(name);
            PyErr_Format(CorruptBatchError, "header value length %lld exceeds the record",
                         (long long)n);
            goto fail;
        }
        else {
            value = PyBytes_FromStringAndSize((const char *)d + i, (Py_ssize_t)n);
            if (value == NULL) {
                Py_DECREF(name);
                goto fail;
            }
            i += (Py_ssize_t)n;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(name);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, name);
        PyTuple_SET_ITEM(pair, 1, value);
        int rc = PyList_Append(headers, pair);
        Py_DECREF(pair);
        if (rc < 0)
            goto fail;
    }
    *pi = i;
    PyObject *frozen = PyList_AsTuple(headers);  /* records' headers are immutable */
    Py_DECREF(headers);
    return frozen;
fail:
    Py_DECREF(headers);
    return NULL;
}

/* A key or value: length varint, then that many bytes (-1 = None). */
static PyObject *
read_bytes_field(const uint8_t *d, Py_ssize_t len, Py_ssize_t *pi, Py_ssize_t rec_end,
                 const char *what, int64_t *size)
{
    int64_t n;
    if (read_varint(d, len, pi, &n, 32, 1) < 0)
        return NULL;
    if (n < 0) {
        if (n != -1) {
            PyErr_Format(CorruptBatchError, "invalid %s length %lld", what, (long long)n);
            return NULL;
        }
        *size = -1;
        return Py_NewRef(Py_None);
    }
    if (n > rec_end - *pi) {
        PyErr_Format(CorruptBatchError, "%s length %lld exceeds the record", what,
                     (long long)n);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)d + *pi, (Py_ssize_t)n);
    *pi += (Py_ssize_t)n;
    *size = n;
    return out;
}

PyDoc_STRVAR(decode_records_as_doc,
"decode_records_as(cls, fields, constants, data, pos, end, count, base_offset,\n"
"                  base_timestamp, append_time, max_records) -> (list, next_pos)\n\n"
"Decode the next min(count, max_records) of the count v2 records left in data[pos:end]\n"
"into new cls objects (made with cls.__new__, no __init__).  fields[0:7] name the\n"
"attributes receiving offset, timestamp, key, value, headers, key size and value size\n"
"(-1 for null); None skips one.  fields[7:] receive constants, in order.  Same rules\n"
"and errors as default_record.py_decode_records_as.");

static PyObject *
decode_records_as(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t pos, end, count, max_records, n;
    long long base_offset, base_timestamp;
    PyObject *append_time;
    Shape shape;
    Py_buffer view;

    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "decode_records_as expects 11 arguments, got %zd",
                     nargs);
        return NULL;
    }
    pos = PyLong_AsSsize_t(args[4]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    end = PyLong_AsSsize_t(args[5]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    count = PyLong_AsSsize_t(args[6]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    base_offset = PyLong_AsLongLong(args[7]);
    if (base_offset == -1 && PyErr_Occurred())
        return NULL;
    base_timestamp = PyLong_AsLongLong(args[8]);
    if (base_timestamp == -1 && PyErr_Occurred())
        return NULL;
    append_time = args[9];
    if (append_time != Py_None && !PyLong_Check(append_time)) {
        PyErr_SetString(PyExc_TypeError, "append_time must be an int or None");
        return NULL;
    }
    max_records = PyLong_AsSsize_t(args[10]);
    if (max_records == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *d = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len;
    if (pos < 0 || end > len) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "records span [%zd, %zd) is outside the %zd-byte buffer",
                     pos, end, len);
        return NULL;
    }
    if (count < 0 || count > floor_div(end - pos, MIN_RECORD_SIZE)) {
        PyBuffer_Release(&view);
        PyErr_Format(CorruptBatchError, "record batch claims %zd records in %zd bytes",
                     count, end - pos);
        return NULL;
    }
    if (max_records < 0) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "max_records must be >= 0, got %zd", max_records);
        return NULL;
    }
    if (shape_init(&shape, args[0], args[1], args[2]) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    n = count < max_records ? count : max_records;
    /* No reference cycle can form while the objects are built, and all of them stay
     * alive until the list is returned: collecting now would only walk them (and promote
     * them), several times per call once a call builds hundreds of objects.  So the
     * cyclic GC waits until the list is complete. */
    int gc_was_enabled = PyGC_Disable();
    PyObject *out = PyList_New(n);
    if (out == NULL)
        goto error;

    Py_ssize_t i = pos;
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t length, ts_delta, offset_delta, key_size, value_size;
        if (read_varint(d, len, &i, &length, 32, 1) < 0)
            goto error;
        Py_ssize_t rec_end = i + (Py_ssize_t)length;
        if (length < MIN_RECORD_SIZE - 1 || rec_end > end) {
            PyErr_Format(CorruptBatchError, "record at position %zd claims %lld bytes, %zd left",
                         i, (long long)length, end - i);
            goto error;
        }
        i += 1;  /* record attributes (unused) */
        if (read_varint(d, len, &i, &ts_delta, 64, 1) < 0)
            goto error;
        if (read_varint(d, len, &i, &offset_delta, 32, 1) < 0)
            goto error;
        PyObject *key = read_bytes_field(d, len, &i, rec_end, "key", &key_size);
        if (key == NULL)
            goto error;
        PyObject *value = read_bytes_field(d, len, &i, rec_end, "value", &value_size);
        if (value == NULL) {
            Py_DECREF(key);
            goto error;
        }
        PyObject *headers;
        if (i >= len) {
            Py_DECREF(key);
            Py_DECREF(value);
            runs_past();
            goto error;
        }
        if (d[i] == 0) {
            headers = Py_NewRef(empty_tuple);  /* no headers: the shared () */
            i += 1;
        }
        else {
            headers = decode_headers(d, len, &i, rec_end);
        }
        if (headers == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        if (i != rec_end) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            PyErr_Format(CorruptBatchError, "record declared %lld bytes but used %lld",
                         (long long)length, (long long)(length + i - rec_end));
            goto error;
        }
        PyObject *obj = shape.cls->tp_new(shape.cls, empty_tuple, NULL);
        if (obj == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        PyList_SET_ITEM(out, r, obj);  /* the list owns it from here, even half-built */
        if (shape_set(&shape, obj, 0, add_int64(base_offset, offset_delta)) < 0
            || shape_set(&shape, obj, 1, append_time == Py_None
                         ? add_int64(base_timestamp, ts_delta) : Py_NewRef(append_time)) < 0) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        /* shape_set consumes each value, so these three are handed over one by one */
        if (shape_set(&shape, obj, 2, key) < 0) {
            Py_DECREF(value);
            Py_DECREF(headers);
            goto error;
        }
        if (shape_set(&shape, obj, 3, value) < 0) {
            Py_DECREF(headers);
            goto error;
        }
        if (shape_set(&shape, obj, 4, headers) < 0
            || shape_set(&shape, obj, 5, PyLong_FromLongLong(key_size)) < 0
            || shape_set(&shape, obj, 6, PyLong_FromLongLong(value_size)) < 0)
            goto error;
        for (Py_ssize_t k = PER_RECORD_FIELDS; k < shape.n; k++) {
            if (shape_set(&shape, obj, k,
                          Py_NewRef(shape.constants[k - PER_RECORD_FIELDS])) < 0)
                goto error;
        }
    }
    if (n == count && i != end) {
        PyErr_Format(CorruptBatchError, "%zd bytes left over after %zd records", end - i,
                     count);
        goto error;
    }
    shape_clear(&shape);
    PyBuffer_Release(&view);
    if (gc_was_enabled)
        PyGC_Enable();
    PyObject *result = Py_BuildValue("(Nn)", out, i);
    return result;

error:
    Py_XDECREF(out);  /* NULL slots of a partly filled list are fine */
    shape_clear(&shape);
    PyBuffer_Release(&view);
    if (gc_was_enabled)
        PyGC_Enable();
    return NULL;
}

/* ------------------------------------------------------------------ encoding */

static int
varint_size(uint64_t zz)
{
    int n = 1;
    while (zz >= 0x80) {
        zz >>= 7;
        n++;
    }
    return n;
}

static uint8_t *
put_varint(uint8_t *p, uint64_t zz)
{
    while (zz >= 0x80) {
        *p++ = (uint8_t)((zz & 0x7F) | 0x80);
        zz >>= 7;
    }
    *p++ = (uint8_t)zz;
    return p;
}

static uint64_t
zz32(int64_t v)
{
    return (uint64_t)(uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static uint64_t
zz64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* An int within [lo, hi], else the reference's ValueError (TypeError for non-ints). */
static int
as_ranged(PyObject *o, long long lo, long long hi, const char *what, long long *out)
{
    int overflow = 0;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s out of %s range: %S", what,
                     hi == INT32_MAX ? "int32" : "int64", o);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct {
    PyObject *key_str;      /* borrowed */
    const char *key;        /* UTF-8 */
    Py_ssize_t key_len;
    Py_buffer value;        /* .obj NULL = None */
} HeaderItem;

PyDoc_STRVAR(encode_record_doc,
"encode_record(out, offset_delta, timestamp_delta, key, value, headers) -> int\n\n"
"Append one record to the bytearray out; returns its size.  Same bytes and errors as\n"
"default_record.py_encode_record.");

/* Append one record to the bytearray out; its size, or -1 with an exception set.  The
 * deltas are already range-checked.  Shared with other extensions through the capsule
 * below (the producer's batch appender), so there is one encoder. */
static Py_ssize_t
encode_record_c(PyObject *out, int32_t offset_delta, int64_t ts_delta, PyObject *key_obj,
                PyObject *value_obj, PyObject *headers_obj)
{
    Py_buffer key = {0}, value = {0};
    HeaderItem *items = NULL;
    Py_ssize_t n_headers = 0, h = 0;
    PyObject *seq = NULL;
    Py_ssize_t result = -1;

    if (key_obj != Py_None && PyObject_GetBuffer(key_obj, &key, PyBUF_SIMPLE) < 0)
        return -1;
    if (value_obj != Py_None && PyObject_GetBuffer(value_obj, &value, PyBUF_SIMPLE) < 0)
        goto done;

    Py_ssize_t body = 1 + varint_size(zz64(ts_delta)) + varint_size(zz32(offset_delta));
    body += key.obj ? varint_size(zz32(key.len)) + key.len : 1;
    body += value.obj ? varint_size(zz32(value.len)) + value.len : 1;
    int has_headers = PyObject_IsTrue(headers_obj);
    if (has_headers < 0)
        goto done;
    if (has_headers) {
        seq = PySequence_Fast(headers_obj, "headers must be a sequence of (str, bytes) pairs");
        if (seq == NULL)
            goto done;
        n_headers = PySequence_Fast_GET_SIZE(seq);
        if (n_headers > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "too many headers");
            goto done;
        }
        items = PyMem_Calloc(n_headers ? n_headers : 1, sizeof(HeaderItem));
        if (items == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        body += varint_size(zz32(n_headers));
        for (h = 0; h < n_headers; h++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(seq, h);
            PyObject *k, *v;
            if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
                k = PyTuple_GET_ITEM(pair, 0);
                v = PyTuple_GET_ITEM(pair, 1);
            }
            else if (PyList_Check(pair) && PyList_GET_SIZE(pair) == 2) {
                k = PyList_GET_ITEM(pair, 0);
                v = PyList_GET_ITEM(pair, 1);
            }
            else {
                PyErr_SetString(PyExc_TypeError, "a header must be a (str, bytes) pair");
                goto done;
            }
            if (!PyUnicode_Check(k)) {
                PyErr_Format(PyExc_TypeError, "header key must be str, not %.100s",
                             Py_TYPE(k)->tp_name);
                goto done;
            }
            items[h].key_str = k;
            items[h].key = PyUnicode_AsUTF8AndSize(k, &items[h].key_len);
            if (items[h].key == NULL)
                goto done;
            body += varint_size(zz32(items[h].key_len)) + items[h].key_len;
            if (v == Py_None) {
                body += 1;
            }
            else {
                if (PyObject_GetBuffer(v, &items[h].value, PyBUF_SIMPLE) < 0)
                    goto done;
                body += varint_size(zz32(items[h].value.len)) + items[h].value.len;
            }
        }
    }
    else {
        body += 1;
    }
    if (body > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "record too large");
        goto done;
    }
    Py_ssize_t total = varint_size(zz32(body)) + body;
    Py_ssize_t before = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, before + total) < 0)
        goto done;
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(out) + before;
    p = put_varint(p, zz32(body));
    *p++ = 0;  /* attributes */
    p = put_varint(p, zz64(ts_delta));
    p = put_varint(p, zz32(offset_delta));
    if (key.obj) {
        p = put_varint(p, zz32(key.len));
        memcpy(p, key.buf, key.len);
        p += key.len;
    }
    else {
        *p++ = 1;
    }
    if (value.obj) {
        p = put_varint(p, zz32(value.len));
        memcpy(p, value.buf, value.len);
        p += value.len;
    }
    else {
        *p++ = 1;
    }
    if (has_headers) {
        p = put_varint(p, zz32(n_headers));
        for (Py_ssize_t j = 0; j < n_headers; j++) {
            p = put_varint(p, zz32(items[j].key_len));
            memcpy(p, items[j].key, items[j].key_len);
            p += items[j].key_len;
            if (items[j].value.obj) {
                p = put_varint(p, zz32(items[j].value.len));
                memcpy(p, items[j].value.buf, items[j].value.len);
                p += items[j].value.len;
            }
            else {
                *p++ = 1;
            }
        }
    }
    else {
        *p++ = 0;
    }
    result = total;

done:
    if (items != NULL) {
        for (Py_ssize_t j = 0; j < n_headers; j++) {
            if (items[j].value.obj)
                PyBuffer_Release(&items[j].value);
        }
        PyMem_Free(items);
    }
    Py_XDECREF(seq);
    if (key.obj)
        PyBuffer_Release(&key);
    if (value.obj)
        PyBuffer_Release(&value);
    return result;
}

static PyObject *
encode_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long offset_delta, ts_delta;

    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "encode_record expects 6 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *out = args[0];
    if (!PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "out must be a bytearray");
        return NULL;
    }
    /* the reference checks the timestamp delta first, then the offset delta */
    if (as_ranged(args[2], INT64_MIN, INT64_MAX, "varlong", &ts_delta) < 0)
        return NULL;
    if (as_ranged(args[1], INT32_MIN, INT32_MAX, "varint", &offset_delta) < 0)
        return NULL;
    Py_ssize_t size = encode_record_c(out, (int32_t)offset_delta, (int64_t)ts_delta, args[3],
                                      args[4], args[5]);
    return size < 0 ? NULL : PyLong_FromSsize_t(size);
}

/* ------------------------------------------------------------------ module */

static PyMethodDef methods[] = {
    {"decode_records_as", (PyCFunction)(void (*)(void))decode_records_as, METH_FASTCALL,
     decode_records_as_doc},
    {"encode_record", (PyCFunction)(void (*)(void))encode_record, METH_FASTCALL,
     encode_record_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "millrace.record._speedups",
    "C accelerator for millrace.record.default_record (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (millrace_speedups_refused("millrace.record._speedups"))
        return NULL;
    PyObject *errors = PyImport_ImportModule("millrace.common.errors");
    if (errors == NULL)
        return NULL;
    CorruptBatchError = PyObject_GetAttrString(errors, "CorruptBatchError");
    Py_DECREF(errors);
    if (CorruptBatchError == NULL)
        return NULL;
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* the encoder for other extensions: see millrace_record_capi.h */
    static MillraceRecordCAPI capi = {MILLRACE_RECORD_CAPI_VERSION, encode_record_c};
    PyObject *capsule = PyCapsule_New(&capi, MILLRACE_RECORD_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
