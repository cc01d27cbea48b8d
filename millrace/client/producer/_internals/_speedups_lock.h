/*
 * The accumulator's lock for the producer's C accelerator (see _speedups.c).
 * Included once by _speedups.c (after BatchCore and RecordCore); not a separate unit.
 */
#ifndef MILLRACE_PRODUCER_SPEEDUPS_LOCK_H
#define MILLRACE_PRODUCER_SPEEDUPS_LOCK_H

/* ------------------------------------------------------------------ Lock */

/* A non-reentrant lock with threading.Lock's interface (acquire(blocking=True,
 * timeout=-1), release(), locked(), the context manager) for the accumulator: its
 * methods take their arguments without building a tuple, and SendPath takes it with one
 * C call.  A blocked acquire waits without the GIL.  Unlike threading.Lock, a blocked
 * acquire is not interrupted by signals (the accumulator holds it for microseconds). */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;
} Lock;

static PyObject *
lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    Lock *self = (Lock *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "can't allocate lock");
        return NULL;
    }
    self->locked = 0;
    return (PyObject *)self;
}

static void
lock_dealloc(Lock *self)
{
    if (self->lock != NULL) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1 acquired, 0 not (timeout), -1 error. */
static int
lock_take(Lock *self, PY_TIMEOUT_T timeout_us)
{
    PyLockStatus r = PyThread_acquire_lock_timed(self->lock, 0, 0);
    if (r == PY_LOCK_FAILURE && timeout_us != 0) {
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(self->lock, timeout_us, 0);
        Py_END_ALLOW_THREADS
    }
    if (r == PY_LOCK_ACQUIRED) {
        self->locked = 1;
        return 1;
    }
    return 0;
}

static PyObject *
lock_acquire(Lock *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *blocking_obj = Py_True, *timeout_obj = NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "acquire() takes at most 2 arguments");
        return NULL;
    }
    if (nargs > 0)
        blocking_obj = args[0];
    if (nargs > 1)
        timeout_obj = args[1];
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        if (PyUnicode_CompareWithASCIIString(kw, "blocking") == 0 && nargs < 1)
            blocking_obj = args[nargs + k];
        else if (PyUnicode_CompareWithASCIIString(kw, "timeout") == 0 && nargs < 2)
            timeout_obj = args[nargs + k];
        else {
            PyErr_Format(PyExc_TypeError, "acquire() got an unexpected keyword argument "
                         "'%U'", kw);
            return NULL;
        }
    }
    int blocking = PyObject_IsTrue(blocking_obj);
    if (blocking < 0)
        return NULL;
    PY_TIMEOUT_T timeout_us = blocking ? -1 : 0;
    if (timeout_obj != NULL) {
        double timeout = PyFloat_AsDouble(timeout_obj);
        if (timeout == -1.0 && PyErr_Occurred())
            return NULL;
        if (!blocking && timeout != -1.0) {
            PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking "
                                              "call");
            return NULL;
        }
        if (timeout < 0 && timeout != -1.0) {
            PyErr_SetString(PyExc_ValueError, "timeout value must be positive");
            return NULL;
        }
        if (blocking && timeout >= 0) {
            if (timeout * 1e6 >= (double)PY_TIMEOUT_MAX) {
                PyErr_SetString(PyExc_OverflowError, "timestamp out of range for platform time_t");
                return NULL;
            }
            timeout_us = (PY_TIMEOUT_T)(timeout * 1e6);
        }
    }
    return PyBool_FromLong(lock_take(self, timeout_us));
}

static PyObject *
lock_release(Lock *self, PyObject *unused)
{
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    self->locked = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *
lock_enter(Lock *self, PyObject *unused)
{
    lock_take(self, -1);
    Py_RETURN_TRUE;
}

static PyObject *
lock_exit(Lock *self, PyObject *const *args, Py_ssize_t nargs)
{
    return lock_release(self, NULL);
}

static PyObject *
lock_locked(Lock *self, PyObject *unused)
{
    return PyBool_FromLong(self->locked);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_FASTCALL | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool, as threading.Lock.acquire."},
    {"release", (PyCFunction)lock_release, METH_NOARGS, "Release; RuntimeError if unlocked."},
    {"locked", (PyCFunction)lock_locked, METH_NOARGS, "Whether the lock is held."},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))lock_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "millrace.client.producer._internals._speedups.Lock",
    .tp_doc = "threading.Lock's interface, cheaper to call (the accumulator's lock).",
    .tp_basicsize = sizeof(Lock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = lock_new,
    .tp_dealloc = (destructor)lock_dealloc,
    .tp_methods = lock_methods,
};

#endif
