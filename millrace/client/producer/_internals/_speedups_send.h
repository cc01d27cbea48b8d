/*
 * murmur2 and SendPath, send()'s common case, for the producer's C accelerator
 * (see _speedups.c and send_path.py).
 * Included once by _speedups.c (after BatchCore and RecordCore); not a separate unit.
 */
#ifndef MILLRACE_PRODUCER_SPEEDUPS_SEND_H
#define MILLRACE_PRODUCER_SPEEDUPS_SEND_H

/* ------------------------------------------------------------------ murmur2 */

PyDoc_STRVAR(murmur2_doc,
"murmur2(data) -> int\n\n"
"Kafka's murmur2 of a bytes object as a signed 32-bit int (built_in_partitioner.py_murmur2).");

static int32_t
murmur2_of(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t blocks = length / 4;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        const unsigned char *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    const unsigned char *tail = data + 4 * blocks;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *
murmur2(PyObject *self, PyObject *data)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int32_t h = murmur2_of(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(h);
}

/* ------------------------------------------------------------------ SendPath */

/* Interned attribute names and the empty headers tuple, made at import. */
static PyObject *empty_tuple;
static PyObject *s_topics, *s_idle_ms, *s_lock, *s_cluster, *s_partition_counts,
    *s_closed, *s_partitioner, *s_current, *s_partition, *s_produced_bytes,
    *s_sticky_batch_size, *s_maybe_switch, *s_batches;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *record_type;   /* ProducerRecord: exactly this class, not a subclass */
    PyObject *metadata;      /* ProducerMetadata: _cluster read per call */
    PyObject *tracked;       /* metadata._topics: topic -> idle expiry ms */
    PyObject *acc;           /* RecordAccumulator: _closed read under its lock */
    PyObject *acc_topics;    /* accumulator._topics: topic -> _TopicInfo */
    Lock *lock;              /* accumulator._lock */
    PyObject *wakeup;
    PyObject *clock;         /* None: the wall clock in C; else a callable -> int ms */
    PyObject *fallback;      /* the full send(record, callback) */
    long long idle_ms;
    long long max_record_size;
    long long overhead;
    int key_is_bytes, value_is_bytes, ignore_keys;
    int closed;              /* close(): every call falls back */
} SendPath;

static int
sendpath_traverse(SendPath *self, visitproc visit, void *arg)
{
    Py_VISIT(self->record_type);
    Py_VISIT(self->metadata);
    Py_VISIT(self->tracked);
    Py_VISIT(self->acc);
    Py_VISIT(self->acc_topics);
    Py_VISIT(self->lock);
    Py_VISIT(self->wakeup);
    Py_VISIT(self->clock);
    Py_VISIT(self->fallback);
    return 0;
}

static int
sendpath_clear(SendPath *self)
{
    Py_CLEAR(self->record_type);
    Py_CLEAR(self->metadata);
    Py_CLEAR(self->tracked);
    Py_CLEAR(self->acc);
    Py_CLEAR(self->acc_topics);
    Py_CLEAR(self->lock);
    Py_CLEAR(self->wakeup);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->fallback);
    return 0;
}

static void
sendpath_dealloc(SendPath *self)
{
    PyObject_GC_UnTrack(self);
    sendpath_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *sendpath_call(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames);

static int
sendpath_init(SendPath *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"record_type", "metadata", "accumulator", "wakeup", "clock",
                            "max_record_size", "overhead", "key_is_bytes", "value_is_bytes",
                            "ignore_keys", "fallback", NULL};
    PyObject *record_type, *metadata, *acc, *wakeup, *clock, *fallback;
    long long max_record_size, overhead;
    int key_is_bytes, value_is_bytes, ignore_keys;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOLLpppO:SendPath", names,
                                     &record_type, &metadata, &acc, &wakeup, &clock,
                                     &max_record_size, &overhead, &key_is_bytes,
                                     &value_is_bytes, &ignore_keys, &fallback))
        return -1;
    PyObject *tracked = NULL, *idle = NULL, *acc_topics = NULL, *lock = NULL;
    long long idle_ms;
    tracked = PyObject_GetAttr(metadata, s_topics);
    if (tracked == NULL || !PyDict_CheckExact(tracked))
        goto bad;
    idle = PyObject_GetAttr(metadata, s_idle_ms);
    if (idle == NULL)
        goto bad;
    idle_ms = PyLong_AsLongLong(idle);
    if (idle_ms == -1 && PyErr_Occurred())
        goto bad;
    acc_topics = PyObject_GetAttr(acc, s_topics);
    if (acc_topics == NULL || !PyDict_CheckExact(acc_topics))
        goto bad;
    lock = PyObject_GetAttr(acc, s_lock);
    if (lock == NULL)
        goto bad;
    if (!PyObject_TypeCheck(lock, &LockType)) {
        PyErr_SetString(PyExc_TypeError, "SendPath: the accumulator's _lock must be a "
                                         "_speedups.Lock");
        goto bad;
    }
    Py_DECREF(idle);
    Py_XSETREF(self->record_type, Py_NewRef(record_type));
    Py_XSETREF(self->metadata, Py_NewRef(metadata));
    Py_XSETREF(self->tracked, tracked);
    Py_XSETREF(self->acc, Py_NewRef(acc));
    Py_XSETREF(self->acc_topics, acc_topics);
    Py_XSETREF(self->lock, (Lock *)lock);
    Py_XSETREF(self->wakeup, Py_NewRef(wakeup));
    Py_XSETREF(self->clock, Py_NewRef(clock));
    Py_XSETREF(self->fallback, Py_NewRef(fallback));
    self->closed = 0;
    self->idle_ms = idle_ms;
    self->max_record_size = max_record_size;
    self->overhead = overhead;
    self->key_is_bytes = key_is_bytes;
    self->value_is_bytes = value_is_bytes;
    self->ignore_keys = ignore_keys;
    self->vectorcall = (vectorcallfunc)sendpath_call;
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "SendPath: _topics must be dicts");
    Py_XDECREF(tracked);
    Py_XDECREF(idle);
    Py_XDECREF(acc_topics);
    Py_XDECREF(lock);
    return -1;
}

/* None, meaning "run the full send", for the many early exits. */
#define FALLBACK() do { Py_RETURN_NONE; } while (0)

/* obj.name as a C long long, or -1 with an error (or with *ok = 0 for a non-int). */
static int
attr_as_ll(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    if (!PyLong_CheckExact(v)) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_TypeError, "SendPath: expected an int attribute");
        return -1;
    }
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Under the accumulator's lock: append to the partition's last batch.  Returns a new
 * reference to the future, Py_None (new reference) to fall back, or NULL on error;
 * *full is the batch's full flag after the append. */
static PyObject *
sendpath_locked(SendPath *self, PyObject *info, PyObject *cluster, PyObject *partition,
                PyObject *ts, PyObject *key, PyObject *value, PyObject *callback,
                PyObject *now, int *full, int *appended)
{
    PyObject *closed = PyObject_GetAttr(self->acc, s_closed);
    if (closed == NULL)
        return NULL;
    int is_closed = PyObject_IsTrue(closed);
    Py_DECREF(closed);
    if (is_closed < 0)
        return NULL;
    if (is_closed)
        FALLBACK();
    PyObject *partitioner = NULL, *sticky = NULL, *batches = NULL, *dq = NULL;
    PyObject *last = NULL, *future = NULL, *result = NULL;
    if (partition == NULL) {  /* the topic's sticky partition */
        partitioner = PyObject_GetAttr(info, s_partitioner);
        if (partitioner == NULL)
            goto done;
        sticky = PyObject_GetAttr(partitioner, s_current);
        if (sticky == NULL)
            goto done;
        if (sticky == Py_None) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        partition = PyObject_GetAttr(sticky, s_partition);
        if (partition == NULL)
            goto done;
    }
    else {
        Py_INCREF(partition);
    }
    batches = PyObject_GetAttr(info, s_batches);
    if (batches == NULL || !PyDict_CheckExact(batches))
        goto fallback;
    dq = PyDict_GetItemWithError(batches, partition);  /* borrowed */
    if (dq == NULL) {
        if (PyErr_Occurred())
            goto done;
        goto fallback;
    }
    Py_ssize_t n = PySequence_Size(dq);
    if (n < 0)
        goto done;
    if (n == 0)
        goto fallback;
    last = PySequence_GetItem(dq, n - 1);
    if (last == NULL)
        goto done;
    if (!PyObject_TypeCheck(last, &BatchCoreType))
        goto fallback;
    PyObject *append_args[6] = {ts, key, value, empty_tuple, callback, now};
    future = batch_try_append((BatchCore *)last, append_args, 6);
    if (future == NULL)
        goto done;
    if (future == Py_None) {
        result = future;
        future = NULL;
        goto done;
    }
    *appended = 1;
    *full = ((BatchCore *)last)->full;
    if (sticky != NULL) {
        long long produced, limit;
        if (attr_as_ll(sticky, s_produced_bytes, &produced) < 0)
            goto done;
        produced += ((BatchCore *)last)->last_record_size;
        PyObject *p = PyLong_FromLongLong(produced);
        if (p == NULL || PyObject_SetAttr(sticky, s_produced_bytes, p) < 0) {
            Py_XDECREF(p);
            goto done;
        }
        Py_DECREF(p);
        if (attr_as_ll(partitioner, s_sticky_batch_size, &limit) < 0)
            goto done;
        if (produced >= limit) {
            PyObject *r = PyObject_CallMethodObjArgs(partitioner, s_maybe_switch, sticky,
                                                     cluster, *full ? Py_True : Py_False,
                                                     NULL);
            if (r == NULL)
                goto done;
            Py_DECREF(r);
        }
    }
    result = future;
    future = NULL;
    goto done;
fallback:
    if (!PyErr_Occurred())
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(future);
    Py_XDECREF(last);
    Py_XDECREF(batches);
    Py_XDECREF(partition);
    Py_XDECREF(sticky);
    Py_XDECREF(partitioner);
    return result;
}

/* The common case: the future, Py_None to fall back, or NULL on error (*appended says
 * whether the record went into a batch before the error). */
static PyObject *
sendpath_try(SendPath *self, PyObject *obj, PyObject *callback, int *appended)
{
    if (self->closed ||
        (PyObject *)Py_TYPE(obj) != self->record_type ||
        !PyObject_TypeCheck(obj, &RecordCoreType))
        FALLBACK();
    RecordCore *record = (RecordCore *)obj;
    PyObject *headers = record->headers;
    if (headers != NULL && headers != Py_None &&
        !((PyTuple_CheckExact(headers) && PyTuple_GET_SIZE(headers) == 0) ||
          (PyList_CheckExact(headers) && PyList_GET_SIZE(headers) == 0)))
        FALLBACK();
    PyObject *topic = record->topic, *key = record->key, *value = record->value;
    PyObject *partition = record->partition, *timestamp = record->timestamp;
    if (topic == NULL || key == NULL || value == NULL || partition == NULL ||
        timestamp == NULL)
        FALLBACK();
    long long now_ms;
    if (self->clock == Py_None) {
        struct timespec tspec;
        if (clock_gettime(CLOCK_REALTIME, &tspec) != 0)
            return PyErr_SetFromErrno(PyExc_OSError);
        now_ms = (long long)tspec.tv_sec * 1000 + tspec.tv_nsec / 1000000;
    }
    else {
        PyObject *t = PyObject_CallNoArgs(self->clock);
        if (t == NULL)
            return NULL;
        if (!PyLong_CheckExact(t)) {
            Py_DECREF(t);
            FALLBACK();
        }
        now_ms = PyLong_AsLongLong(t);
        Py_DECREF(t);
        if (now_ms == -1 && PyErr_Occurred())
            return NULL;
    }
    int known = PyDict_Contains(self->tracked, topic);
    if (known < 0)
        return NULL;
    if (!known)
        FALLBACK();
    PyObject *expiry = PyLong_FromLongLong(now_ms + self->idle_ms);
    if (expiry == NULL)
        return NULL;
    int failed = PyDict_SetItem(self->tracked, topic, expiry);
    Py_DECREF(expiry);
    if (failed < 0)
        return NULL;
    if (key != Py_None && !(self->key_is_bytes && PyBytes_CheckExact(key)))
        FALLBACK();
    if (value != Py_None && !(self->value_is_bytes && PyBytes_CheckExact(value)))
        FALLBACK();
    if (timestamp != Py_None && !PyLong_CheckExact(timestamp))
        FALLBACK();
    PyObject *info = PyDict_GetItemWithError(self->acc_topics, topic);  /* borrowed */
    if (info == NULL) {
        if (PyErr_Occurred())
            return NULL;
        FALLBACK();
    }
    Py_INCREF(info);
    PyObject *cluster = NULL, *counts = NULL, *now = NULL, *part = NULL, *result = NULL;
    cluster = PyObject_GetAttr(self->metadata, s_cluster);
    if (cluster == NULL)
        goto done;
    counts = PyObject_GetAttr(cluster, s_partition_counts);
    if (counts == NULL)
        goto done;
    if (!PyDict_CheckExact(counts))
        goto fallback;
    PyObject *count_obj = PyDict_GetItemWithError(counts, topic);  /* borrowed */
    if (count_obj == NULL) {
        if (PyErr_Occurred())
            goto done;
        goto fallback;
    }
    long long count = PyLong_AsLongLong(count_obj);
    if (count == -1 && PyErr_Occurred())
        goto done;
    if (partition != Py_None) {
        if (!PyLong_CheckExact(partition))
            goto fallback;
        int overflow = 0;
        long long p = PyLong_AsLongLongAndOverflow(partition, &overflow);
        if (p == -1 && PyErr_Occurred())
            goto done;
        if (overflow || p >= count)
            goto fallback;
        part = Py_NewRef(partition);
    }
    else if (key != Py_None && !self->ignore_keys) {
        if (count <= 0)
            goto fallback;
        int32_t h = murmur2_of((const unsigned char *)PyBytes_AS_STRING(key),
                               PyBytes_GET_SIZE(key));
        part = PyLong_FromLongLong((long long)(h & 0x7fffffff) % count);
        if (part == NULL)
            goto done;
    }
    long long size = self->overhead + (key == Py_None ? 0 : PyBytes_GET_SIZE(key)) +
                     (value == Py_None ? 0 : PyBytes_GET_SIZE(value));
    if (size > self->max_record_size)
        goto fallback;
    now = PyLong_FromLongLong(now_ms);
    if (now == NULL)
        goto done;
    PyObject *ts = timestamp == Py_None ? now : timestamp;
    if (!lock_take(self->lock, 0))  /* held by another thread: send waits for it */
        goto fallback;
    int full = 0;
    result = sendpath_locked(self, info, cluster, part, ts, key, value, callback, now,
                             &full, appended);
    self->lock->locked = 0;
    PyThread_release_lock(self->lock->lock);
    if (result != NULL && result != Py_None && full) {
        PyObject *r = PyObject_CallNoArgs(self->wakeup);
        if (r == NULL)
            Py_CLEAR(result);
        else
            Py_DECREF(r);
    }
    goto done;
fallback:
    if (!PyErr_Occurred())
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(part);
    Py_XDECREF(now);
    Py_XDECREF(counts);
    Py_XDECREF(cluster);
    Py_DECREF(info);
    return result;
}

static PyObject *
sendpath_call(PyObject *selfobj, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    SendPath *self = (SendPath *)selfobj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *record = NULL, *callback = Py_None;
    if (nargs >= 1 && nargs <= 2 && nkw == 0) {
        record = args[0];
        if (nargs == 2)
            callback = args[1];
    }
    else if (nargs == 1 && nkw == 1 &&
             PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "callback") == 0) {
        record = args[0];
        callback = args[1];
    }
    else  /* anything else: the full send reports it as Python does */
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    if (self->fallback == NULL) {
        PyErr_SetString(PyExc_TypeError, "SendPath was not initialized");
        return NULL;
    }
    int appended = 0;
    PyObject *result = sendpath_try(self, record, callback, &appended);
    if (result == NULL && !appended)
        PyErr_Clear();  /* nothing was buffered: the full send raises it (or not) itself */
    else if (result != Py_None)
        return result;
    Py_XDECREF(result);
    PyObject *call_args[2] = {record, callback};
    return PyObject_Vectorcall(self->fallback, call_args, 2, NULL);
}

static PyObject *
sendpath_close(SendPath *self, PyObject *unused)
{
    self->closed = 1;
    Py_RETURN_NONE;
}

static PyMethodDef sendpath_methods[] = {
    {"close", (PyCFunction)sendpath_close, METH_NOARGS,
     "Every later call runs the full send (which raises: the producer is closed)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SendPathType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "millrace.client.producer._internals._speedups.SendPath",
    .tp_doc = "send()'s common case in one call (see send_path.PySendPath).",
    .tp_basicsize = sizeof(SendPath),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)sendpath_init,
    .tp_dealloc = (destructor)sendpath_dealloc,
    .tp_traverse = (traverseproc)sendpath_traverse,
    .tp_clear = (inquiry)sendpath_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(SendPath, vectorcall),
    .tp_methods = sendpath_methods,
};

#endif
