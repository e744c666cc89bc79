/* libelu._ext: the per-call fast path of libelu.elu() and elu_backward()
 * for PyTorch tensors, NumPy arrays and CuPy arrays. Through ctypes a call
 * costs about 20 us of Python (DLPack capsules, ctypes structures, argument
 * checks), many times a small input's compute (docs/DESIGN.md, "The Python
 * call"). This reads what the C side needs straight off the arrays through
 * the Python C API (a tensor's data_ptr, shape, stride, dtype and device; a
 * NumPy array's buffer; a CuPy array's data pointer, device, shape,
 * strides and dtype) into DLTensors on the stack and calls the library.
 * Where libelu._torch_ext loaded, it reads and makes PyTorch tensors
 * instead, through PyTorch's C++ API (ext_torch.h).
 *
 * It takes only what it is sure of: exact torch.Tensor (or Parameter),
 * numpy.ndarray and cupy.ndarray objects of the four dtypes, in layouts the
 * C side takes where they lie, on one device, with float parameters. For
 * anything else, and for what the library refuses (ELU_ERR_INVALID_ARG,
 * _UNSUPPORTED: refusals come before any memory is touched), it returns
 * NotImplemented and the Python side takes its general path, which
 * explains the refusal.
 *
 * The library's functions come from the Python side as addresses in the
 * libelu.so that ctypes loaded, so that both paths share one library and
 * its contexts whichever libelu.so is in use. No array library is
 * imported here: their types come from the Python side once it meets
 * them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "elu.h"
#include "ext_torch.h"

/* Ranks beyond this take the general path (the C side itself takes
 * strided views up to rank 8, compact ones of any rank). */
#define MAX_RANK 16
/* Default contexts are cached for CUDA device ordinals below this. */
#define MAX_DEVICES 64

/* The attributes and methods read, interned once. */
enum {
    DTYPE, LAYOUT, IS_NEG, IS_CPU, IS_CUDA, GET_DEVICE, DATA_PTR, SHAPE, STRIDE, /* torch */
    REQUIRES_GRAD, IS_INFERENCE,
    DATA, PTR, DEVICE_ID, STRIDES, /* CuPy */
    HANDLE, VALUE,                 /* libelu.Context's ctypes handle */
    NAMES
};
static const char *const NAME_TEXT[NAMES] = {
    "dtype", "layout", "is_neg", "is_cpu", "is_cuda", "get_device", "data_ptr", "shape",
    "stride", "requires_grad", "is_inference", "data", "ptr", "device_id", "strides",
    "_handle", "value"};

typedef const char *(*last_error_fn)(const elu_ctx *);

/* What the Python side told the module (bind(), bind_torch(),
 * bind_numpy(), bind_cupy()), and the default contexts it handed out,
 * which live as long as the process. */
typedef struct {
    elu_run_fn run;
    elu_run_backward_fn run_backward;
    last_error_fn last_error;
    PyObject *error_type; /* libelu.EluError */
    PyObject *context_of; /* device ordinal (-1: the CPU) -> elu_ctx address */
    elu_ctx *cpu_ctx;
    elu_ctx *cuda_ctx[MAX_DEVICES];
    PyObject *tensor_type, *parameter_type, *torch_dtypes, *strided, *raw_stream,
        *torch_empty_like, *grad_enabled, *increment_version;
    /* libelu._torch_ext's functions, where it loaded, and their capsule. */
    const elu_torch_api *torch_api;
    PyObject *torch_api_capsule;
    /* numpy.ndarray, numpy.empty_like; numpy.floating and numpy.integer,
     * whose scalars parameters may be. */
    PyObject *ndarray_type, *numpy_empty_like, *numpy_floating, *numpy_integer;
    /* cupy.ndarray, cupy.empty_like, cupy.cuda.get_current_stream, and the
     * dtypes float32, float64 and float16 (NumPy's objects). */
    PyObject *cupy_type, *cupy_empty_like, *cupy_stream, *cupy_dtypes;
    PyObject *name[NAMES];
    elu_ext_api api; /* what api() hands out, once bound */
} state;

/* One array as the C side sees it, and what must be released after. */
typedef struct {
    DLTensor t;
    int64_t shape[MAX_RANK];
    int64_t strides[MAX_RANK];
    int device; /* -1: host memory; else the CUDA device ordinal */
    Py_buffer view;
    bool has_view;
} array;

/* The four dtypes, in elu_dtype's order. */
static const DLDataType DL_TYPES[4] = {
    {kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}};

static state *state_of(PyObject *module)
{
    return (state *)PyModule_GetState(module);
}

static PyObject *new_ref(PyObject *obj)
{
    Py_INCREF(obj);
    return obj;
}

static PyObject *not_taken(void)
{
    return new_ref(Py_NotImplemented);
}

static PyObject *call_method(const state *st, PyObject *obj, int name)
{
    PyObject *args[] = {obj};
    return PyObject_VectorcallMethod(st->name[name], args,
                                     1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* A tuple of Python ints into int64s; NOT_TAKEN where it is not one. */
static int int64s(PyObject *tuple, int64_t *out, Py_ssize_t rank)
{
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != rank)
        return NOT_TAKEN;
    for (Py_ssize_t d = 0; d < rank; d++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, d));
        if (v == -1 && PyErr_Occurred())
            return FAILED;
        out[d] = v;
    }
    return TAKEN;
}

/* An attribute or method result that must be True or False. */
static int boolean(PyObject *v, bool *out)
{
    if (!v)
        return FAILED;
    const int result = v == Py_True || v == Py_False ? TAKEN : NOT_TAKEN;
    *out = v == Py_True;
    Py_DECREF(v);
    return result;
}

/* A tensor's dtype: one of the four, with a strided layout. */
static int torch_dtype(const state *st, PyObject *obj, array *a)
{
    PyObject *dtype = PyObject_GetAttr(obj, st->name[DTYPE]);
    PyObject *layout = dtype ? PyObject_GetAttr(obj, st->name[LAYOUT]) : NULL;
    int found = -1;
    for (int i = 0; layout && i < 4; i++)
        if (PyTuple_GET_ITEM(st->torch_dtypes, i) == dtype)
            found = i;
    const bool strided = layout == st->strided;
    Py_XDECREF(dtype);
    Py_XDECREF(layout);
    if (!layout)
        return FAILED;
    if (found < 0 || !strided)
        return NOT_TAKEN;
    a->t.dtype = DL_TYPES[found];
    return TAKEN;
}

/* A tensor's device: the CPU or a CUDA device. */
static int torch_device(const state *st, PyObject *obj, array *a)
{
    bool is_cpu = false, is_cuda = false;
    int status = boolean(PyObject_GetAttr(obj, st->name[IS_CPU]), &is_cpu);
    if (status == TAKEN && !is_cpu)
        status = boolean(PyObject_GetAttr(obj, st->name[IS_CUDA]), &is_cuda);
    if (status != TAKEN || (!is_cpu && !is_cuda))
        return status == FAILED ? FAILED : NOT_TAKEN;
    a->device = -1;
    a->t.device = (DLDevice){kDLCPU, 0};
    if (is_cpu)
        return TAKEN;
    PyObject *index = call_method(st, obj, GET_DEVICE);
    const long v = index ? PyLong_AsLong(index) : -1;
    Py_XDECREF(index);
    if (v == -1 && PyErr_Occurred())
        return FAILED;
    if (v < 0 || v > INT32_MAX)
        return NOT_TAKEN;
    a->device = (int)v;
    a->t.device = (DLDevice){kDLCUDA, (int32_t)v};
    return TAKEN;
}

/* What a tensor holds: one of the four dtypes, strided, on the CPU or a
 * CUDA device, without the negative bit (torch.imag(z.conj()) has it: its
 * memory holds the values' negatives). */
static int torch_kind(const state *st, PyObject *obj, array *a)
{
    int status = torch_dtype(st, obj, a);
    bool neg = true;
    if (status == TAKEN)
        status = boolean(call_method(st, obj, IS_NEG), &neg);
    if (status == TAKEN && neg)
        status = NOT_TAKEN;
    return status == TAKEN ? torch_device(st, obj, a) : status;
}

/* A tensor's memory: its data pointer (storage offset included), shape and
 * strides in items. A tensor without storage (a functorch wrapper, a fake
 * tensor) raises in data_ptr(): the general path says what it is. */
static int torch_layout(const state *st, PyObject *obj, array *a)
{
    PyObject *ptr = call_method(st, obj, DATA_PTR);
    if (!ptr) {
        PyErr_Clear();
        return NOT_TAKEN;
    }
    a->t.data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (PyErr_Occurred())
        return FAILED;
    PyObject *shape = PyObject_GetAttr(obj, st->name[SHAPE]);
    PyObject *strides = shape ? call_method(st, obj, STRIDE) : NULL;
    int status = FAILED;
    if (strides) {
        const Py_ssize_t rank = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
        status = rank < 0 || rank > MAX_RANK ? NOT_TAKEN : int64s(shape, a->shape, rank);
        if (status == TAKEN)
            status = int64s(strides, a->strides, rank);
        a->t.ndim = (int)rank;
    }
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return status;
}

/* A NumPy array through the buffer protocol: native float16, float32 or
 * float64 ("e", "f", "d"), aligned, strided by whole items; an output
 * writable. NumPy's other layouts take the general path, which copies
 * such inputs and explains such outputs. */
static int numpy_array(PyObject *obj, array *a, bool writable)
{
    if (PyObject_GetBuffer(obj, &a->view, writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO)) {
        PyErr_Clear();
        return NOT_TAKEN;
    }
    a->has_view = true;
    const Py_buffer *v = &a->view;
    const char *f = v->format;
    if (!f || f[0] == '\0' || f[1] != '\0' || v->ndim > MAX_RANK)
        return NOT_TAKEN;
    const int code = f[0] == 'f' ? 0 : f[0] == 'd' ? 1 : f[0] == 'e' ? 2 : -1;
    if (code < 0 || v->itemsize != DL_TYPES[code].bits / 8 ||
        (uintptr_t)v->buf % (uintptr_t)v->itemsize)
        return NOT_TAKEN;
    a->t.dtype = DL_TYPES[code];
    a->t.data = v->buf;
    a->t.ndim = v->ndim;
    for (int d = 0; d < v->ndim; d++) {
        if (v->strides[d] % v->itemsize && v->shape[d] > 1)
            return NOT_TAKEN;
        a->shape[d] = v->shape[d];
        a->strides[d] = v->strides[d] / v->itemsize;
    }
    a->device = -1;
    a->t.device = (DLDevice){kDLCPU, 0};
    return TAKEN;
}

/* The array libraries the fast path knows, by an object's exact type. */
enum library { UNKNOWN, TORCH, NUMPY, CUPY };

static enum library library_of(const state *st, PyObject *obj)
{
    PyObject *type = (PyObject *)Py_TYPE(obj);
    if (st->tensor_type && (type == st->tensor_type || type == st->parameter_type))
        return TORCH;
    if (st->ndarray_type && type == st->ndarray_type)
        return NUMPY;
    if (st->cupy_type && type == st->cupy_type)
        return CUPY;
    return UNKNOWN;
}

/* A CuPy array: float32, float64 or float16, aligned, strided by whole
 * items; its pointer and device from its memory (`data`, a MemoryPointer
 * at its first element). */
static int cupy_array(const state *st, PyObject *obj, array *a)
{
    PyObject *dtype = PyObject_GetAttr(obj, st->name[DTYPE]);
    if (!dtype)
        return FAILED;
    int code = -1;
    for (int i = 0; i < 3; i++)
        if (PyTuple_GET_ITEM(st->cupy_dtypes, i) == dtype)
            code = i;
    Py_DECREF(dtype);
    if (code < 0)
        return NOT_TAKEN;
    a->t.dtype = DL_TYPES[code];
    const int64_t itemsize = DL_TYPES[code].bits / 8;
    PyObject *memory = PyObject_GetAttr(obj, st->name[DATA]);
    PyObject *ptr = memory ? PyObject_GetAttr(memory, st->name[PTR]) : NULL;
    PyObject *device = ptr ? PyObject_GetAttr(memory, st->name[DEVICE_ID]) : NULL;
    PyObject *shape = device ? PyObject_GetAttr(obj, st->name[SHAPE]) : NULL;
    PyObject *strides = shape ? PyObject_GetAttr(obj, st->name[STRIDES]) : NULL;
    int status = strides ? TAKEN : FAILED;
    const Py_ssize_t rank = status == TAKEN && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (status == TAKEN && (rank < 0 || rank > MAX_RANK))
        status = NOT_TAKEN;
    if (status == TAKEN) {
        a->t.data = PyLong_AsVoidPtr(ptr);
        const long id = PyLong_AsLong(device);
        a->device = (int)id;
        a->t.device = (DLDevice){kDLCUDA, (int32_t)id};
        a->t.ndim = (int)rank;
        status = PyErr_Occurred() ? FAILED
               : id < 0 || id > INT32_MAX || (uintptr_t)a->t.data % (uintptr_t)itemsize
                   ? NOT_TAKEN : int64s(shape, a->shape, rank);
    }
    if (status == TAKEN)
        status = int64s(strides, a->strides, rank);
    for (Py_ssize_t d = 0; status == TAKEN && d < rank; d++) {
        if (a->strides[d] % itemsize && a->shape[d] > 1)
            status = NOT_TAKEN;
        a->strides[d] /= itemsize;
    }
    Py_XDECREF(strides);
    Py_XDECREF(shape);
    Py_XDECREF(device);
    Py_XDECREF(ptr);
    Py_XDECREF(memory);
    return status;
}

/* Read one array. An output made here is read as any other: a function
 * mode may have answered torch.empty_like with another dtype or device. */
static int read_array(const state *st, PyObject *obj, array *a, bool writable)
{
    a->has_view = false;
    a->t.shape = a->shape;
    a->t.strides = a->strides;
    a->t.byte_offset = 0;
    switch (library_of(st, obj)) {
    case NUMPY: return numpy_array(obj, a, writable);
    case CUPY: return cupy_array(st, obj, a);
    case TORCH: break;
    case UNKNOWN: return NOT_TAKEN;
    }
    if (st->torch_api)
        return st->torch_api->read(obj, &a->t, &a->device);
    const int status = torch_kind(st, obj, a);
    return status == TAKEN ? torch_layout(st, obj, a) : status;
}

/* Whether an out tensor may be written here, as PyTorch's in-place
 * operations ask: one that autograd records gradients for, or an inference
 * tensor (which has no version counter), goes to the general path, which
 * refuses it or, inside inference mode, writes it. */
static int torch_writable(const state *st, PyObject *out)
{
    if (st->torch_api)
        return st->torch_api->writable(out);
    bool requires_grad = false, grad_enabled = false, inference = true;
    int status = boolean(PyObject_GetAttr(out, st->name[REQUIRES_GRAD]), &requires_grad);
    if (status == TAKEN && requires_grad)
        status = boolean(PyObject_CallNoArgs(st->grad_enabled), &grad_enabled);
    if (status == TAKEN && !grad_enabled)
        status = boolean(call_method(st, out, IS_INFERENCE), &inference);
    if (status == FAILED)
        return FAILED;
    return status == TAKEN && !grad_enabled && !inference ? TAKEN : NOT_TAKEN;
}

/* After a write into an out tensor: its version counter bumped, so that a
 * backward that saved it refuses to run. */
static int torch_wrote(const state *st, PyObject *out)
{
    if (st->torch_api) {
        st->torch_api->wrote(out);
        return TAKEN;
    }
    PyObject *bumped = PyObject_CallOneArg(st->increment_version, out);
    Py_XDECREF(bumped);
    return bumped ? TAKEN : FAILED;
}

static void release(array *arrays, int count)
{
    for (int i = 0; i < count; i++)
        if (arrays[i].has_view)
            PyBuffer_Release(&arrays[i].view);
}

/* Whether the arrays agree in dtype, shape and device; where they do not,
 * the general path words what differs. */
static bool alike(const array *arrays, int count)
{
    const DLTensor *first = &arrays[0].t;
    for (int i = 1; i < count; i++) {
        const DLTensor *t = &arrays[i].t;
        if (t->dtype.code != first->dtype.code || t->dtype.bits != first->dtype.bits ||
            t->ndim != first->ndim || arrays[i].device != arrays[0].device)
            return false;
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != first->shape[d])
                return false;
    }
    return true;
}

/* The default context for a device, asked of the Python side once. */
static elu_ctx *context_for(state *st, int device)
{
    elu_ctx **slot = device < 0 ? &st->cpu_ctx
                   : device < MAX_DEVICES ? &st->cuda_ctx[device] : NULL;
    if (slot && *slot)
        return *slot;
    PyObject *handle = PyObject_CallFunction(st->context_of, "i", device);
    elu_ctx *ctx = handle ? (elu_ctx *)PyLong_AsVoidPtr(handle) : NULL;
    Py_XDECREF(handle);
    if (ctx && slot)
        *slot = ctx;
    return ctx;
}

/* The CUDA stream that CuPy works on (on its current device, as the
 * general path asks it). */
static int cupy_stream(const state *st, elu_stream *stream)
{
    PyObject *current = PyObject_CallNoArgs(st->cupy_stream);
    PyObject *ptr = current ? PyObject_GetAttr(current, st->name[PTR]) : NULL;
    *stream = ptr ? (elu_stream)PyLong_AsVoidPtr(ptr) : NULL;
    Py_XDECREF(ptr);
    Py_XDECREF(current);
    return PyErr_Occurred() ? FAILED : TAKEN;
}

/* The CUDA stream the array's library works on for the device (the first
 * array's: they are of one library); NULL for host memory, where the C
 * side does not use it. */
static int stream_for(const state *st, PyObject *first, int device, elu_stream *stream)
{
    *stream = NULL;
    if (device < 0)
        return TAKEN;
    if (library_of(st, first) == CUPY)
        return cupy_stream(st, stream);
    if (st->torch_api)
        return st->torch_api->stream(device, stream);
    if (!st->raw_stream)
        return NOT_TAKEN;
    PyObject *raw = PyObject_CallFunction(st->raw_stream, "i", device);
    *stream = raw ? (elu_stream)PyLong_AsVoidPtr(raw) : NULL;
    Py_XDECREF(raw);
    return PyErr_Occurred() ? FAILED : TAKEN;
}

/* Whether obj is a NumPy real scalar (numpy.floating or numpy.integer:
 * not bool, not complex), once NumPy is bound. */
static bool numpy_real(const state *st, PyObject *obj)
{
    return st->numpy_floating &&
           (PyObject_TypeCheck(obj, (PyTypeObject *)st->numpy_floating) ||
            PyObject_TypeCheck(obj, (PyTypeObject *)st->numpy_integer));
}

/* A parameter that is a finite float, an int (not a bool) or a NumPy real
 * scalar, as the general path's float(value) makes it (a subclass's own
 * __float__ included); that path converts or refuses the others. */
static bool finite_float(const state *st, PyObject *obj, double *out)
{
    if (PyFloat_CheckExact(obj)) {
        *out = PyFloat_AS_DOUBLE(obj);
    } else if (PyLong_CheckExact(obj)) {
        *out = PyLong_AsDouble(obj);
    } else if (PyFloat_Check(obj) || numpy_real(st, obj)) {
        PyObject *value = PyNumber_Float(obj);
        *out = value ? PyFloat_AS_DOUBLE(value) : -1.0;
        Py_XDECREF(value);
    } else {
        return false;
    }
    if (*out == -1.0 && PyErr_Occurred()) {
        PyErr_Clear(); /* too large, or float() fails: the general path says so */
        return false;
    }
    return isfinite(*out);
}

/* A new array like the first input, by its library's empty_like. */
static PyObject *empty_like(const state *st, PyObject *like)
{
    switch (library_of(st, like)) {
    case NUMPY: return PyObject_CallOneArg(st->numpy_empty_like, like);
    case CUPY: return PyObject_CallOneArg(st->cupy_empty_like, like);
    default:
        return st->torch_api ? st->torch_api->empty_like(like)
                             : PyObject_CallOneArg(st->torch_empty_like, like);
    }
}

/* libelu.EluError(status, the context's last error), raised. */
static void raise_failure(const state *st, const elu_ctx *ctx, elu_status status)
{
    const char *message = st->last_error(ctx);
    PyObject *detail = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
    PyObject *error = detail ? PyObject_CallFunction(st->error_type, "iO", (int)status,
                                                     detail) : NULL;
    if (error)
        PyErr_SetObject(st->error_type, error);
    Py_XDECREF(error);
    Py_XDECREF(detail);
}

/* The arrays' library call, the GIL released: a CPU run of millions of
 * elements, or a first compile, takes long. */
static elu_status call(const state *st, elu_ctx *ctx, const elu_params *p, array *a,
                       int count, int is_result, elu_stream stream)
{
    elu_status status;
    Py_BEGIN_ALLOW_THREADS
    if (count == 2)
        status = st->run(ctx, p, &a[0].t, &a[1].t, stream);
    else
        status = st->run_backward(ctx, p, &a[0].t, &a[1].t, is_result, &a[2].t, stream);
    Py_END_ALLOW_THREADS
    return status;
}

/* Where a call runs, as its optional last arguments (context, stream)
 * name it. context: a libelu.Context, or NULL for the arrays' device's
 * default; its handle is read just before the call, after the last Python
 * code the call runs (a __float__, empty_like), which may close it.
 * stream: for CUDA arrays it must be the one their library works on,
 * which the call takes anyway; another needs the producer's work ordered
 * before it, which the general path asks of __dlpack__. */
struct where {
    PyObject *context;
    bool stream_named;
    elu_stream stream;
};

/* An int from 0 to 2^64 - 1, as an address. */
static int address_of(PyObject *obj, uintptr_t *address)
{
    if (!PyLong_CheckExact(obj))
        return NOT_TAKEN;
    const unsigned long long value = PyLong_AsUnsignedLongLong(obj);
    if (PyErr_Occurred()) { /* negative, or past 64 bits */
        PyErr_Clear();
        return NOT_TAKEN;
    }
    *address = (uintptr_t)value;
    return TAKEN;
}

/* The `count` (0 to 2) optional arguments at args: the context, None or a
 * libelu.Context (the Python side passes 0 for what is not one, which the
 * general path refuses); the stream, None or a handle (what is not one,
 * the general path refuses). */
static int where_of(PyObject *const *args, Py_ssize_t count, struct where *w)
{
    *w = (struct where){NULL, false, NULL};
    uintptr_t address;
    if (count > 0 && args[0] != Py_None) {
        if (PyLong_Check(args[0]))
            return NOT_TAKEN;
        w->context = args[0];
    }
    if (count > 1 && args[1] != Py_None) {
        if (address_of(args[1], &address) != TAKEN)
            return NOT_TAKEN;
        w->stream_named = true;
        w->stream = (elu_stream)address;
    }
    return TAKEN;
}

/* A libelu.Context's elu_ctx, read off its ctypes handle; NULL where it
 * is closed (its handle None), which the general path refuses. */
static elu_ctx *handle_of(const state *st, PyObject *context)
{
    PyObject *handle = PyObject_GetAttr(context, st->name[HANDLE]);
    PyObject *value = handle && handle != Py_None ? PyObject_GetAttr(handle, st->name[VALUE])
                                                  : NULL;
    uintptr_t address = 0;
    if (!value || address_of(value, &address) != TAKEN)
        address = 0;
    Py_XDECREF(value);
    Py_XDECREF(handle);
    PyErr_Clear();
    return (elu_ctx *)address;
}

/* Run on the inputs into out (None: a new array like the first input):
 * forward with one input, backward (is_result 0 or 1) with two, where w
 * says. */
static PyObject *run_arrays(state *st, PyObject *const *inputs, int count, PyObject *out,
                            const elu_params *p, int is_result, const struct where *w)
{
    array a[3];
    int read = 0, status = TAKEN;
    for (; read < count && status == TAKEN; read++)
        status = read_array(st, inputs[read], &a[read], false);
    PyObject *result = NULL;
    if (status == TAKEN) {
        result = out == Py_None ? empty_like(st, inputs[0]) : new_ref(out);
        status = result ? read_array(st, result, &a[read++], true) : FAILED;
    }
    const bool torch_out = out != Py_None && library_of(st, out) == TORCH;
    if (status == TAKEN && torch_out)
        status = torch_writable(st, out);
    elu_stream stream = NULL;
    if (status == TAKEN)
        status = alike(a, read) ? stream_for(st, inputs[0], a[0].device, &stream) : NOT_TAKEN;
    if (status == TAKEN && w->stream_named && a[0].device >= 0 && w->stream != stream)
        status = NOT_TAKEN;
    elu_ctx *ctx = NULL;
    if (status == TAKEN && w->context) /* no Python code runs after this */
        status = (ctx = handle_of(st, w->context)) ? TAKEN : NOT_TAKEN;
    else if (status == TAKEN && !(ctx = context_for(st, a[0].device)))
        status = FAILED;
    if (status == TAKEN) {
        const elu_status run = call(st, ctx, p, a, read, is_result, stream);
        if (run == ELU_OK)
            status = torch_out ? torch_wrote(st, out) : TAKEN;
        else if (run == ELU_ERR_INVALID_ARG || run == ELU_ERR_UNSUPPORTED)
            status = NOT_TAKEN;
        else {
            raise_failure(st, ctx, run);
            status = FAILED;
        }
    }
    release(a, read);
    if (status == TAKEN)
        return result;
    Py_XDECREF(result);
    return status == FAILED ? NULL : not_taken();
}

static bool bound(const state *st)
{
    if (!st->run)
        PyErr_SetString(PyExc_RuntimeError, "libelu._ext: bind() was not called");
    return st->run;
}

/* elu's arguments (x, alpha, scale, input_scale, out), the parameters read
 * into *p: out (or a new array like x), or NotImplemented where the
 * general path must serve. */
static PyObject *elu_of(state *st, PyObject *const *args, elu_params *p, const struct where *w)
{
    *p = (elu_params){ELU_F32, 0, 0, 0};
    if (!finite_float(st, args[1], &p->alpha) || !finite_float(st, args[2], &p->scale) ||
        !finite_float(st, args[3], &p->input_scale))
        return not_taken();
    return run_arrays(st, args, 1, args[4], p, 0, w);
}

/* elu(x, alpha, scale, input_scale, out[, context[, stream]]): context
 * and stream None or absent for the defaults, else as where_of() takes
 * them. */
static PyObject *ext_elu(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    state *st = state_of(module);
    if (nargs < 5 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError,
                        "elu(x, alpha, scale, input_scale, out[, context[, stream]])");
        return NULL;
    }
    if (!bound(st))
        return NULL;
    struct where w;
    if (where_of(args + 5, nargs - 5, &w) != TAKEN)
        return not_taken();
    elu_params p;
    return elu_of(st, args, &p, &w);
}

/* elu_backward(grad_output, saved, alpha, scale, input_scale, is_result,
 * out[, context[, stream]]): as elu(). */
static PyObject *ext_elu_backward(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    state *st = state_of(module);
    if (nargs < 7 || nargs > 9) {
        PyErr_SetString(PyExc_TypeError, "elu_backward(grad_output, saved, alpha, scale, "
                                         "input_scale, is_result, out[, context[, stream]])");
        return NULL;
    }
    if (!bound(st))
        return NULL;
    struct where w;
    elu_params p = {ELU_F32, 0, 0, 0};
    if (where_of(args + 7, nargs - 7, &w) != TAKEN || !finite_float(st, args[2], &p.alpha) ||
        !finite_float(st, args[3], &p.scale) || !finite_float(st, args[4], &p.input_scale) ||
        !PyBool_Check(args[5]) || (args[5] == Py_True && p.alpha < 0))
        return not_taken();
    return run_arrays(st, args, 2, args[6], &p, args[5] == Py_True, &w);
}

/* elu_ext_api's functions (ext_torch.h). */
static PyObject *api_elu(PyObject *ext, PyObject *const args[5], elu_params *p)
{
    static const struct where defaults = {NULL, false, NULL};
    return elu_of(state_of(ext), args, p, &defaults);
}

static elu_ctx *api_context(PyObject *ext, int device)
{
    return context_for(state_of(ext), device);
}

static void api_raise_failure(PyObject *ext, const elu_ctx *ctx, elu_status status)
{
    raise_failure(state_of(ext), ctx, status);
}

/* api(): what libelu._torch_ext's eager call and operators call, in a
 * capsule that lives while this module does. */
static PyObject *ext_api(PyObject *module, PyObject *unused)
{
    (void)unused;
    state *st = state_of(module);
    return bound(st) ? PyCapsule_New(&st->api, ELU_EXT_API_NAME, NULL) : NULL;
}

/* A function's address, as ctypes gives it. */
static void *address(PyObject *obj)
{
    void *p = PyLong_AsVoidPtr(obj);
    if (!p && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "libelu._ext: a NULL function address");
    return p;
}

/* Replace a held reference. */
static void hold(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    *slot = new_ref(value);
    Py_XDECREF(old);
}

/* bind(run_dlpack, run_backward_dlpack, last_error, EluError, context_of):
 * the library's functions as addresses, the exception to raise, and the
 * callable that gives a device's default context (-1: the CPU's). */
static PyObject *ext_bind(PyObject *module, PyObject *args)
{
    state *st = state_of(module);
    PyObject *run, *run_backward, *last_error, *error_type, *context_of;
    if (!PyArg_ParseTuple(args, "OOOOO", &run, &run_backward, &last_error, &error_type,
                          &context_of))
        return NULL;
    void *const fns[3] = {address(run), address(run_backward), address(last_error)};
    if (PyErr_Occurred())
        return NULL;
    st->run = (elu_run_fn)(uintptr_t)fns[0];
    st->run_backward = (elu_run_backward_fn)(uintptr_t)fns[1];
    st->last_error = (last_error_fn)(uintptr_t)fns[2];
    st->api = (elu_ext_api){api_elu, api_context, st->run, st->run_backward, st->last_error,
                            api_raise_failure};
    hold(&st->error_type, error_type);
    hold(&st->context_of, context_of);
    Py_RETURN_NONE;
}

/* bind_torch(Tensor, Parameter, (float32, float64, float16, bfloat16),
 * strided, current_raw_stream or None, empty_like, is_grad_enabled,
 * autograd.graph.increment_version, libelu._torch_ext's api or None). The
 * CPU's context is asked for again: PyTorch's met, the package makes one
 * that runs on PyTorch's threads. */
static PyObject *ext_bind_torch(PyObject *module, PyObject *args)
{
    state *st = state_of(module);
    PyObject *tensor, *parameter, *dtypes, *strided, *raw_stream, *empty, *grad_enabled,
        *increment_version, *api;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOO", &PyType_Type, &tensor, &PyType_Type,
                          &parameter, &PyTuple_Type, &dtypes, &strided, &raw_stream, &empty,
                          &grad_enabled, &increment_version, &api))
        return NULL;
    if (PyTuple_GET_SIZE(dtypes) != 4) {
        PyErr_SetString(PyExc_ValueError, "bind_torch: four dtypes");
        return NULL;
    }
    const elu_torch_api *functions = NULL;
    if (api != Py_None && !(functions = PyCapsule_GetPointer(api, ELU_TORCH_API_NAME)))
        return NULL;
    hold(&st->tensor_type, tensor);
    hold(&st->parameter_type, parameter);
    hold(&st->torch_dtypes, dtypes);
    hold(&st->strided, strided);
    if (raw_stream == Py_None)
        Py_CLEAR(st->raw_stream);
    else
        hold(&st->raw_stream, raw_stream);
    hold(&st->torch_empty_like, empty);
    hold(&st->grad_enabled, grad_enabled);
    hold(&st->increment_version, increment_version);
    hold(&st->torch_api_capsule, api);
    st->torch_api = functions;
    st->cpu_ctx = NULL;
    Py_RETURN_NONE;
}

/* bind_numpy(ndarray, empty_like, floating, integer). */
static PyObject *ext_bind_numpy(PyObject *module, PyObject *args)
{
    state *st = state_of(module);
    PyObject *ndarray, *empty, *floating, *integer;
    if (!PyArg_ParseTuple(args, "O!OO!O!", &PyType_Type, &ndarray, &empty, &PyType_Type,
                          &floating, &PyType_Type, &integer))
        return NULL;
    hold(&st->ndarray_type, ndarray);
    hold(&st->numpy_empty_like, empty);
    hold(&st->numpy_floating, floating);
    hold(&st->numpy_integer, integer);
    Py_RETURN_NONE;
}

/* bind_cupy(ndarray, empty_like, cuda.get_current_stream, (float32,
 * float64, float16) as NumPy dtypes). */
static PyObject *ext_bind_cupy(PyObject *module, PyObject *args)
{
    state *st = state_of(module);
    PyObject *ndarray, *empty, *stream, *dtypes;
    if (!PyArg_ParseTuple(args, "O!OOO!", &PyType_Type, &ndarray, &empty, &stream,
                          &PyTuple_Type, &dtypes))
        return NULL;
    if (PyTuple_GET_SIZE(dtypes) != 3) {
        PyErr_SetString(PyExc_ValueError, "bind_cupy: three dtypes");
        return NULL;
    }
    hold(&st->cupy_type, ndarray);
    hold(&st->cupy_empty_like, empty);
    hold(&st->cupy_stream, stream);
    hold(&st->cupy_dtypes, dtypes);
    Py_RETURN_NONE;
}

/* The references the state holds, for the garbage collector. */
#define HELD(X)                                                                           \
    X(error_type) X(context_of) X(tensor_type) X(parameter_type) X(torch_dtypes)        \
    X(strided) X(raw_stream) X(torch_empty_like) X(grad_enabled) X(increment_version)  \
    X(torch_api_capsule) X(ndarray_type) X(numpy_empty_like) X(numpy_floating)            \
    X(numpy_integer) X(cupy_type) X(cupy_empty_like) X(cupy_stream) X(cupy_dtypes)

static int ext_traverse(PyObject *module, visitproc visit, void *arg)
{
    state *st = state_of(module);
#define VISIT(field) Py_VISIT(st->field);
    HELD(VISIT)
#undef VISIT
    return 0;
}

static int ext_clear(PyObject *module)
{
    state *st = state_of(module);
#define CLEAR(field) Py_CLEAR(st->field);
    HELD(CLEAR)
#undef CLEAR
    st->torch_api = NULL;
    for (int i = 0; i < NAMES; i++)
        Py_CLEAR(st->name[i]);
    return 0;
}

static void ext_free(void *module)
{
    ext_clear((PyObject *)module);
}

static PyMethodDef ext_methods[] = {
    {"elu", (PyCFunction)(void (*)(void))ext_elu, METH_FASTCALL,
     "elu(x, alpha, scale, input_scale, out[, context[, stream]]): out, a new array, "
     "or NotImplemented"},
    {"elu_backward", (PyCFunction)(void (*)(void))ext_elu_backward, METH_FASTCALL,
     "elu_backward(grad_output, saved, alpha, scale, input_scale, is_result, out[, "
     "context[, stream]])"},
    {"bind", ext_bind, METH_VARARGS,
     "bind(run_dlpack, run_backward_dlpack, last_error, EluError, context_of)"},
    {"bind_torch", ext_bind_torch, METH_VARARGS,
     "bind_torch(Tensor, Parameter, dtypes, strided, raw_stream, empty_like, "
     "is_grad_enabled, increment_version, api)"},
    {"bind_numpy", ext_bind_numpy, METH_VARARGS,
     "bind_numpy(ndarray, empty_like, floating, integer)"},
    {"bind_cupy", ext_bind_cupy, METH_VARARGS,
     "bind_cupy(ndarray, empty_like, get_current_stream, dtypes)"},
    {"api", ext_api, METH_NOARGS, "api(): a capsule of what libelu._torch_ext calls"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ext_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "libelu._ext",
    .m_doc = "The per-call fast path of libelu.elu() and elu_backward().",
    .m_size = sizeof(state),
    .m_methods = ext_methods,
    .m_traverse = ext_traverse,
    .m_clear = ext_clear,
    .m_free = ext_free,
};

PyMODINIT_FUNC PyInit__ext(void);

PyMODINIT_FUNC PyInit__ext(void)
{
    PyObject *module = PyModule_Create(&ext_module);
    state *st = module ? state_of(module) : NULL;
    for (int i = 0; st && i < NAMES; i++)
        if (!(st->name[i] = PyUnicode_InternFromString(NAME_TEXT[i]))) {
            Py_CLEAR(module);
            break;
        }
    return module;
}
