/*
 * Optional C accelerator for the producer's per-record path
 * (millrace.client.producer._internals._speedups).
 *
 * Three base classes, each the C twin of a pure-Python reference class -- PyFutureCore and
 * PyBatchCore in batch_core.py, PyRecordCore in producer_record.py
 * (tests/unit/client/producer/test_batch_core.py runs both and compares bytes, fields,
 * futures and errors):
 *
 *   RecordCore  the fields of ProducerRecord and the checks its constructor makes;
 *               ProducerRecord subclasses it and adds __repr__ and __eq__.
 *   FutureCore  the fields of FutureRecordMetadata (_result, _index, _timestamp,
 *               _key_size, _value_size, _callback); FutureRecordMetadata subclasses it and
 *               adds the methods.
 *   BatchCore   the append state of ProducerBatch (_buf, _base_timestamp,
 *               _max_timestamp, _write_limit, record_count, last_record_size, full,
 *               produce_future, _thunks) and try_append(), which encodes the record
 *               straight into _buf with the record codec's encoder (imported from
 *               millrace.record._speedups through its capsule: one encoder, not two) and
 *               makes the record's future without running any Python code.
 *
 * And, for send() itself (send_path.py holds the reference, PySendPath;
 * tests/unit/client/test_producer_send_path.py runs both against the full send):
 *
 *   SendPath    send()'s common case in one call: checks the record, touches the
 *               metadata, picks the partition (given, murmur2 of the key, or the sticky
 *               one), takes the accumulator's Lock without blocking and appends to the
 *               partition's last batch with BatchCore.try_append -- or calls the full
 *               send (its fallback) when anything is out of the ordinary.
 *   Lock        threading.Lock's interface on a PyThread lock: the accumulator's lock,
 *               which SendPath takes without a Python call.
 *   murmur2     Kafka's murmur2 (built_in_partitioner.py_murmur2).
 *
 * Python sees the fields as ordinary attributes (member descriptors), so the rest of
 * ProducerBatch (drain, build, split, complete) is unchanged Python.  try_append makes
 * futures of the class given to set_future_type() (FutureRecordMetadata), allocated
 * directly: no __init__ call.
 *
 * Threading: everything runs with the GIL held; a batch is appended to only under the
 * accumulator's lock (see record_accumulator.py).  Both types take part in the cyclic GC
 * (a callback can refer back to anything).
 *
 * MILLRACE_NO_SPEEDUPS set to anything but "" or "0" makes the import fail, as for the
 * record codec, so the pure-Python classes are used.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "millrace_record_capi.h"

static const MillraceRecordCAPI *record_api;
static PyTypeObject *future_type;  /* set_future_type(); a subclass of FutureCore */

/* ------------------------------------------------------------------ FutureCore */

typedef struct {
    PyObject_HEAD
    PyObject *result;
    PyObject *callback;
    long long index;
    long long timestamp;
    long long key_size;
    long long value_size;
} FutureCore;

static int
future_traverse(FutureCore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->result);
    Py_VISIT(self->callback);
    return 0;
}

static int
future_clear(FutureCore *self)
{
    Py_CLEAR(self->result);
    Py_CLEAR(self->callback);
    return 0;
}

static void
future_dealloc(FutureCore *self)
{
    PyObject_GC_UnTrack(self);
    future_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
future_init(FutureCore *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"result", "index", "timestamp", "key_size", "value_size",
                            "callback", NULL};
    PyObject *result, *callback = Py_None;
    long long index, timestamp, key_size, value_size;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLLL|O:FutureRecordMetadata", names,
                                     &result, &index, &timestamp, &key_size, &value_size,
                                     &callback))
        return -1;
    Py_XSETREF(self->result, Py_NewRef(result));
    Py_XSETREF(self->callback, Py_NewRef(callback));
    self->index = index;
    self->timestamp = timestamp;
    self->key_size = key_size;
    self->value_size = value_size;
    return 0;
}

static PyMemberDef future_members[] = {
    {"_result", T_OBJECT, offsetof(FutureCore, result), 0, NULL},
    {"_callback", T_OBJECT, offsetof(FutureCore, callback), 0, NULL},
    {"_index", T_LONGLONG, offsetof(FutureCore, index), 0, NULL},
    {"_timestamp", T_LONGLONG, offsetof(FutureCore, timestamp), 0, NULL},
    {"_key_size", T_LONGLONG, offsetof(FutureCore, key_size), 0, NULL},
    {"_value_size", T_LONGLONG, offsetof(FutureCore, value_size), 0, NULL},
    {NULL},
};

static PyTypeObject FutureCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "millrace.client.producer._internals._speedups.FutureCore",
    .tp_doc = "The fields of a FutureRecordMetadata (see batch_core.PyFutureCore).",
    .tp_basicsize = sizeof(FutureCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)future_init,
    .tp_dealloc = (destructor)future_dealloc,
    .tp_traverse = (traverseproc)future_traverse,
    .tp_clear = (inquiry)future_clear,
    .tp_members = future_members,
};

/* ------------------------------------------------------------------ BatchCore */

typedef struct {
    PyObject_HEAD
    PyObject *buf;             /* bytearray: header placeholder, then the records */
    PyObject *produce_future;  /* the batch's ProduceRequestResult */
    PyObject *thunks;          /* list: futures of the records that have a callback */
    long long base_timestamp;
    long long max_timestamp;
    Py_ssize_t write_limit;
    Py_ssize_t record_count;
    Py_ssize_t last_record_size;
    char full;
} BatchCore;

static int
batch_traverse(BatchCore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buf);
    Py_VISIT(self->produce_future);
    Py_VISIT(self->thunks);
    return 0;
}

static int
batch_clear(BatchCore *self)
{
    Py_CLEAR(self->buf);
    Py_CLEAR(self->produce_future);
    Py_CLEAR(self->thunks);
    return 0;
}

static void
batch_dealloc(BatchCore *self)
{
    PyObject_GC_UnTrack(self);
    batch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
batch_init(BatchCore *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"buf", "write_limit", "produce_future", NULL};
    PyObject *buf, *produce_future;
    Py_ssize_t write_limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!nO:BatchCore", names,
                                     &PyByteArray_Type, &buf, &write_limit, &produce_future))
        return -1;
    PyObject *thunks = PyList_New(0);
    if (thunks == NULL)
        return -1;
    Py_XSETREF(self->buf, Py_NewRef(buf));
    Py_XSETREF(self->produce_future, Py_NewRef(produce_future));
    Py_XSETREF(self->thunks, thunks);
    self->base_timestamp = -1;
    self->max_timestamp = -1;
    self->write_limit = write_limit;
    self->record_count = 0;
    self->last_record_size = 0;
    self->full = 0;
    return 0;
}

/* len(x), or -1 for None: a record's key/value size as RecordMetadata reports it. */
static int
size_or_minus_one(PyObject *o, long long *out)
{
    if (o == Py_None) {
        *out = -1;
        return 0;
    }
    Py_ssize_t n = PyBytes_CheckExact(o) ? PyBytes_GET_SIZE(o) : PyObject_Length(o);
    if (n < 0)
        return -1;
    *out = n;
    return 0;
}

PyDoc_STRVAR(try_append_doc,
"try_append(timestamp, key, value, headers, callback, now_ms) -> future or None\n\n"
"Append one record, or None if the batch has no room (or is closed).");

static PyObject *
batch_try_append(BatchCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "try_append expects 6 arguments, got %zd", nargs);
        return NULL;
    }
    if (self->full)
        Py_RETURN_NONE;
    if (future_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_future_type() was not called");
        return NULL;
    }
    PyObject *ts_obj = args[0], *key = args[1], *value = args[2], *headers = args[3];
    PyObject *callback = args[4];
    if (!PyLong_Check(ts_obj)) {
        PyErr_Format(PyExc_TypeError, "timestamp must be an int, not %.100s",
                     Py_TYPE(ts_obj)->tp_name);
        return NULL;
    }
    int overflow = 0;
    long long ts = PyLong_AsLongLongAndOverflow(ts_obj, &overflow);
    if (ts == -1 && PyErr_Occurred())
        return NULL;
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "timestamp out of int64 range: %S", ts_obj);
        return NULL;
    }
    Py_ssize_t count = self->record_count;
    long long delta;
    if (count) {
        if (__builtin_sub_overflow(ts, self->base_timestamp, &delta)) {
            /* the encoder's error, with the delta as the reference computes it */
            PyObject *base = PyLong_FromLongLong(self->base_timestamp);
            PyObject *d = base ? PyNumber_Subtract(ts_obj, base) : NULL;
            if (d != NULL)
                PyErr_Format(PyExc_ValueError, "varlong out of int64 range: %S", d);
            Py_XDECREF(base);
            Py_XDECREF(d);
            return NULL;
        }
    }
    else {
        if (ts < 0) {
            PyErr_Format(PyExc_ValueError, "invalid negative timestamp %lld", ts);
            return NULL;
        }
        self->base_timestamp = ts;
        delta = 0;
    }
    if (count > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "varint out of int32 range: %zd", count);
        return NULL;
    }
    PyObject *buf = self->buf;
    if (buf == NULL || !PyByteArray_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "_buf must be a bytearray");
        return NULL;
    }
    Py_ssize_t before = PyByteArray_GET_SIZE(buf);
    Py_ssize_t size = record_api->encode_record(buf, (int32_t)count, (int64_t)delta, key,
                                                value, headers);
    if (size < 0)
        return NULL;
    if (count && before + size > self->write_limit) {
        /* no room: this record opens the next batch */
        if (PyByteArray_Resize(buf, before) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    long long key_size, value_size;
    if (size_or_minus_one(key, &key_size) < 0 || size_or_minus_one(value, &value_size) < 0)
        return NULL;
    if (before + size >= self->write_limit)
        self->full = 1;
    if (ts > self->max_timestamp)
        self->max_timestamp = ts;
    FutureCore *future = (FutureCore *)future_type->tp_alloc(future_type, 0);
    if (future == NULL)
        return NULL;
    future->result = Py_NewRef(self->produce_future ? self->produce_future : Py_None);
    future->callback = Py_NewRef(callback);
    future->index = count;
    future->timestamp = ts;
    future->key_size = key_size;
    future->value_size = value_size;
    if (callback != Py_None && PyList_Append(self->thunks, (PyObject *)future) < 0) {
        Py_DECREF(future);
        return NULL;
    }
    self->record_count = count + 1;
    self->last_record_size = size;
    return (PyObject *)future;
}

static PyMethodDef batch_methods[] = {
    {"try_append", (PyCFunction)(void (*)(void))batch_try_append, METH_FASTCALL,
     try_append_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef batch_members[] = {
    {"_buf", T_OBJECT_EX, offsetof(BatchCore, buf), 0, NULL},
    {"produce_future", T_OBJECT_EX, offsetof(BatchCore, produce_future), 0, NULL},
    {"_thunks", T_OBJECT_EX, offsetof(BatchCore, thunks), 0, NULL},
    {"_base_timestamp", T_LONGLONG, offsetof(BatchCore, base_timestamp), 0, NULL},
    {"_max_timestamp", T_LONGLONG, offsetof(BatchCore, max_timestamp), 0, NULL},
    {"_write_limit", T_PYSSIZET, offsetof(BatchCore, write_limit), 0, NULL},
    {"record_count", T_PYSSIZET, offsetof(BatchCore, record_count), 0, NULL},
    {"last_record_size", T_PYSSIZET, offsetof(BatchCore, last_record_size), 0, NULL},
    {"full", T_BOOL, offsetof(BatchCore, full), 0, NULL},
    {NULL},
};

static PyTypeObject BatchCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "millrace.client.producer._internals._speedups.BatchCore",
    .tp_doc = "The append state of a ProducerBatch (see batch_core.PyBatchCore).",
    .tp_basicsize = sizeof(BatchCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)batch_init,
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_traverse = (traverseproc)batch_traverse,
    .tp_clear = (inquiry)batch_clear,
    .tp_methods = batch_methods,
    .tp_members = batch_members,
};

/* ------------------------------------------------------------------ RecordCore */

typedef struct {
    PyObject_HEAD
    PyObject *topic;
    PyObject *value;
    PyObject *key;
    PyObject *partition;
    PyObject *timestamp;
    PyObject *headers;
} RecordCore;

static int
record_traverse(RecordCore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->topic);
    Py_VISIT(self->value);
    Py_VISIT(self->key);
    Py_VISIT(self->partition);
    Py_VISIT(self->timestamp);
    Py_VISIT(self->headers);
    return 0;
}

static int
record_clear(RecordCore *self)
{
    Py_CLEAR(self->topic);
    Py_CLEAR(self->value);
    Py_CLEAR(self->key);
    Py_CLEAR(self->partition);
    Py_CLEAR(self->timestamp);
    Py_CLEAR(self->headers);
    return 0;
}

static void
record_dealloc(RecordCore *self)
{
    PyObject_GC_UnTrack(self);
    record_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 if o is not None and o < 0, 0 if not, -1 on error (the reference's `o < 0`). */
static int
is_negative(PyObject *o)
{
    if (o == Py_None)
        return 0;
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        return overflow ? overflow < 0 : v < 0;
    }
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL)
        return -1;
    int r = PyObject_RichCompareBool(o, zero, Py_LT);
    Py_DECREF(zero);
    return r;
}

/* The constructor's checks (the reference's order and messages) and stores; 0 or -1. */
static int
record_fill(RecordCore *self, PyObject *topic, PyObject *value, PyObject *key,
            PyObject *partition, PyObject *timestamp, PyObject *headers)
{
    if (!PyUnicode_Check(topic) || PyUnicode_GET_LENGTH(topic) == 0) {
        PyErr_SetString(PyExc_ValueError, "Topic cannot be null or empty.");
        return -1;
    }
    int negative = is_negative(timestamp);
    if (negative < 0)
        return -1;
    if (negative) {
        PyErr_Format(PyExc_ValueError, "Invalid timestamp: %S. Timestamp should always be "
                     "non-negative or null.", timestamp);
        return -1;
    }
    negative = is_negative(partition);
    if (negative < 0)
        return -1;
    if (negative) {
        PyErr_Format(PyExc_ValueError, "Invalid partition: %S. Partition number should "
                     "always be non-negative or null.", partition);
        return -1;
    }
    Py_XSETREF(self->topic, Py_NewRef(topic));
    Py_XSETREF(self->value, Py_NewRef(value));
    Py_XSETREF(self->key, Py_NewRef(key));
    Py_XSETREF(self->partition, Py_NewRef(partition));
    Py_XSETREF(self->timestamp, Py_NewRef(timestamp));
    Py_XSETREF(self->headers, Py_NewRef(headers));
    return 0;
}

static int
record_init(RecordCore *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"topic", "value", "key", "partition", "timestamp", "headers",
                            NULL};
    PyObject *topic, *value = Py_None, *key = Py_None, *partition = Py_None;
    PyObject *timestamp = Py_None, *headers = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OOOOO:ProducerRecord", names, &topic,
                                     &value, &key, &partition, &timestamp, &headers))
        return -1;
    return record_fill(self, topic, value, key, partition, timestamp, headers);
}

static const char *record_arg_names[] = {"topic", "value", "key", "partition", "timestamp",
                                         "headers"};
#define RECORD_ARGS 6

/* Calling the class itself (tp_vectorcall of the type, installed by
 * install_record_vectorcall): the same arguments and errors as __init__, without building
 * an argument tuple and keyword dict for every record. */
static PyObject *
record_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *values[RECORD_ARGS] = {NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    int given[RECORD_ARGS] = {0};
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    const char *name = ((PyTypeObject *)type)->tp_name;
    if (nargs > RECORD_ARGS) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", name,
                     RECORD_ARGS, nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        values[i] = args[i];
        given[i] = 1;
    }
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        int slot = -1;
        for (int j = 0; j < RECORD_ARGS; j++) {
            if (PyUnicode_CompareWithASCIIString(kw, record_arg_names[j]) == 0) {
                slot = j;
                break;
            }
        }
        if (slot < 0) {
            PyErr_Format(PyExc_TypeError, "'%U' is an invalid keyword argument for %s()", kw,
                         name);
            return NULL;
        }
        if (given[slot]) {
            PyErr_Format(PyExc_TypeError, "argument for %s() given by name ('%s') and "
                         "position (%d)", name, record_arg_names[slot], slot + 1);
            return NULL;
        }
        values[slot] = args[nargs + k];
        given[slot] = 1;
    }
    if (values[0] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'topic' (pos 1)", name);
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)type;
    RecordCore *self = (RecordCore *)tp->tp_alloc(tp, 0);
    if (self == NULL)
        return NULL;
    if (record_fill(self, values[0], values[1], values[2], values[3], values[4],
                    values[5]) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyMemberDef record_members[] = {
    {"topic", T_OBJECT, offsetof(RecordCore, topic), 0, NULL},
    {"value", T_OBJECT, offsetof(RecordCore, value), 0, NULL},
    {"key", T_OBJECT, offsetof(RecordCore, key), 0, NULL},
    {"partition", T_OBJECT, offsetof(RecordCore, partition), 0, NULL},
    {"timestamp", T_OBJECT, offsetof(RecordCore, timestamp), 0, NULL},
    {"headers", T_OBJECT, offsetof(RecordCore, headers), 0, NULL},
    {NULL},
};

static PyTypeObject RecordCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "millrace.client.producer._internals._speedups.RecordCore",
    .tp_doc = "The fields and checks of a ProducerRecord (see producer_record.PyRecordCore).",
    .tp_basicsize = sizeof(RecordCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)record_init,
    .tp_dealloc = (destructor)record_dealloc,
    .tp_traverse = (traverseproc)record_traverse,
    .tp_clear = (inquiry)record_clear,
    .tp_members = record_members,
};

#include "_speedups_lock.h"
#include "_speedups_send.h"

/* ------------------------------------------------------------------ module */

static PyObject *
set_future_type(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &FutureCoreType)) {
        PyErr_SetString(PyExc_TypeError, "set_future_type needs a subclass of FutureCore");
        return NULL;
    }
    Py_XSETREF(future_type, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyObject *
wall_clock_ms(PyObject *self, PyObject *unused)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static PyObject *
install_record_vectorcall(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &RecordCoreType)) {
        PyErr_SetString(PyExc_TypeError, "install_record_vectorcall needs a subclass of "
                                         "RecordCore");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    /* only for a class that constructs exactly as RecordCore does */
    if (tp->tp_init != RecordCoreType.tp_init || tp->tp_new != RecordCoreType.tp_new) {
        PyErr_SetString(PyExc_TypeError, "the class overrides __init__ or __new__");
        return NULL;
    }
    tp->tp_vectorcall = record_vectorcall;  /* never inherited: subclasses call normally */
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"wall_clock_ms", wall_clock_ms, METH_NOARGS,
     "Milliseconds since the epoch (time.time_ns() // 1_000_000, without the bigint)."},
    {"install_record_vectorcall", install_record_vectorcall, METH_O,
     "Let calls of this RecordCore subclass (which must not override __init__ or __new__) "
     "skip the argument tuple and keyword dict."},
    {"murmur2", murmur2, METH_O, murmur2_doc},
    {"set_future_type", set_future_type, METH_O,
     "The class of the futures BatchCore.try_append makes (a FutureCore subclass)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "millrace.client.producer._internals._speedups",
    "C accelerator for the producer's per-record path (optional).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (millrace_speedups_refused("millrace.client.producer._internals._speedups"))
        return NULL;
    record_api = (const MillraceRecordCAPI *)PyCapsule_Import(MILLRACE_RECORD_CAPSULE, 0);
    if (record_api == NULL)
        return NULL;
    if (record_api->version != MILLRACE_RECORD_CAPI_VERSION) {
        PyErr_Format(PyExc_ImportError, "millrace.record._speedups C API version %d, "
                     "expected %d", record_api->version, MILLRACE_RECORD_CAPI_VERSION);
        return NULL;
    }
    if (PyType_Ready(&FutureCoreType) < 0 || PyType_Ready(&BatchCoreType) < 0 ||
        PyType_Ready(&RecordCoreType) < 0 || PyType_Ready(&SendPathType) < 0 ||
        PyType_Ready(&LockType) < 0)
        return NULL;
    if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL)
        return NULL;
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_topics, "_topics"}, {&s_idle_ms, "_idle_ms"}, {&s_lock, "_lock"},
        {&s_cluster, "_cluster"}, {&s_partition_counts, "partition_counts"},
        {&s_closed, "_closed"}, {&s_partitioner, "partitioner"}, {&s_current, "current"},
        {&s_partition, "partition"}, {&s_produced_bytes, "produced_bytes"},
        {&s_sticky_batch_size, "sticky_batch_size"}, {&s_maybe_switch, "maybe_switch"},
        {&s_batches, "batches"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].slot == NULL &&
            (*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL)
            return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "FutureCore", (PyObject *)&FutureCoreType) < 0 ||
        PyModule_AddObjectRef(m, "BatchCore", (PyObject *)&BatchCoreType) < 0 ||
        PyModule_AddObjectRef(m, "RecordCore", (PyObject *)&RecordCoreType) < 0 ||
        PyModule_AddObjectRef(m, "SendPath", (PyObject *)&SendPathType) < 0 ||
        PyModule_AddObjectRef(m, "Lock", (PyObject *)&LockType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
