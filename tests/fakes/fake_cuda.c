/* A fake libcuda.so.1 (the CUDA driver API) for tests: our ctypes calls run against it unchanged.
 *
 * Built by tests/test_native.py with `cc -shared -fPIC -O1 -o DIR/libcuda.so.1 fake_cuda.c` and
 * found first through LD_LIBRARY_PATH=DIR. Every answer comes from the environment:
 *
 *   FAKE_CUDA_VERSION=12040      cuDriverGetVersion (1000 * major + 10 * minor)
 *   FAKE_CUDA_HANG=1             cuInit never returns (a wedged driver)
 *   FAKE_CUDA_INIT=N             cuInit returns N (803 system driver mismatch, 100 no device …);
 *                                default: 0 when FAKE_CUDA_DEVICES lists a device, else 100
 *   FAKE_CUDA_DEVICES=CC|CC      one device per compute capability, e.g. "9.0|8.0"; an item may
 *                                carry its PCI bus id: "9.0@0000:3B:00.0"
 *                                (default bus ids 0000:18:00.0, 0000:38:00.0 … match fake_nvml.c)
 *
 * Context, memory, modules, kernels and events (the smoke test and the OOM probe, doctor/active/):
 *
 *   FAKE_CUDA_NAMES=NAME|NAME    cuDeviceGetName per device (default "Fake CUDA GPU")
 *   FAKE_CUDA_MEM_MIB=81559      each device's memory (cuDeviceTotalMem_v2, cuMemGetInfo_v2 total)
 *   FAKE_CUDA_USED_MIB=0         memory other processes hold on each device
 *   FAKE_CUDA_CTX_MIB=0          what one context itself takes (cuCtxCreate_v2 fails with OOM without it)
 *   FAKE_CUDA_GRANULE=2097152    allocations are charged in multiples of this (the real driver: 2 MiB)
 *   FAKE_CUDA_MAX_BLOCK_MIB=N    the largest block one cuMemAlloc_v2 can get (fragmented memory)
 *   FAKE_CUDA_OOM_AT=BYTES       cuMemAlloc_v2 answers CUDA_ERROR_OUT_OF_MEMORY once a context's charged
 *                                bytes would pass BYTES (memory the driver keeps for itself)
 *   FAKE_CUDA_SM_COUNT=108       CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
 *   FAKE_CUDA_PCIE_GBS=25        host<->device copy rate from pinned memory (pageable: half)
 *   FAKE_CUDA_MEM_BW_GBS=1500    device memory bandwidth (the copy and saxpy kernels)
 *   FAKE_CUDA_FP32_TFLOPS=19.5   FP32 rate of the fma_loop kernel
 *   FAKE_CUDA_PTX_ISA=8.2        newest PTX ISA the "JIT" accepts (newer: CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
 *   FAKE_CUDA_JIT_ERROR=N        cuModuleLoadDataEx returns N (218 invalid PTX, 221 no JIT compiler …),
 *                                with a ptxas-like line in the CU_JIT_ERROR_LOG_BUFFER
 *   FAKE_CUDA_FAULT_KERNEL=NAME  restrict the faults below to launches of this kernel (default: any)
 *   FAKE_CUDA_LAUNCH_ERROR=N     cuLaunchKernel returns N (701 out of resources …)
 *   FAKE_CUDA_SYNC_ERROR=N       the launch fails asynchronously: cuCtxSynchronize / cuEventSynchronize and
 *                                every later call in the context return N (719 launch failed, 700 illegal
 *                                address); 214 (uncorrectable ECC) also adds one to NVML's volatile
 *                                uncorrected counter of that GPU (FAKE_NVML_GPU<i>_ECC of fake_nvml.c)
 *   FAKE_CUDA_HANG=launch|sync   cuLaunchKernel, or the synchronisation after a launch, never returns
 *   FAKE_CUDA_WRONG=I            the kernel writes a wrong value at element I (silent corruption)
 *   FAKE_CUDA_LAUNCH_SETENV=V=X  the first launch sets V=X in the environment (e.g. a throttle reason that
 *                                fake_nvml.c then reports: FAKE_NVML_GPU0_THROTTLE=0x40)
 *   FAKE_CUDA_NVML_SYNC=1        keep FAKE_NVML_GPU<i>_MEM_USED_MIB equal to what this fake has handed out
 *                                (other processes + contexts + allocations), as NVML would see it
 *   FAKE_CUDA_LOG=PATH           append one line per context, allocation and free to PATH (for asserting
 *                                call counts and that every byte was released)
 *
 * Several GPUs (the multi-GPU checks): cuCtxSetCurrent switches between contexts, and
 *
 *   FAKE_CUDA_PEER=0-1,2-3       the pairs cuDeviceCanAccessPeer says yes to (both directions; "none": no
 *                                pair; default: every pair of distinct devices)
 *   FAKE_CUDA_PEER_ENABLE_ERROR=N  cuCtxEnablePeerAccess returns N (217 peer access unsupported, 711 too many
 *                                peers) although cuDeviceCanAccessPeer said yes
 *   FAKE_CUDA_PEER_GBS=40        cuMemcpyPeer's rate between two devices whose contexts enabled peer access
 *   FAKE_CUDA_PEER_GBS_<i>_<j>=R that rate for the pair i < j (e.g. an NVLink pair vs a PCIe pair)
 *                                (without peer access the copy is staged through the host: FAKE_CUDA_PCIE_GBS / 2)
 *   FAKE_CUDA_PEER_WRONG=I       cuMemcpyPeer delivers byte I changed (a corrupting peer path)
 *
 * Kernels: cuModuleGetFunction finds the `.entry NAME(` in the PTX text and checks its parameter list
 * against the table KERNELS below (a PTX file and this fake cannot drift apart silently); cuLaunchKernel
 * then does in host memory what that PTX does. Device memory is backed by host memory only when a copy
 * or kernel touches it, so an 80 GB card costs nothing until used. Time is simulated: every copy and
 * kernel advances the device's clock by bytes / rate or flops / rate, and events read that clock, so
 * measured bandwidths are exactly the configured rates.
 *
 * To extend: add the entry point in its section, start it with REQUIRE_INIT (or REQUIRE_CTX once it
 * needs a context), read its knob with env_int/env_double, and add any new CUresult to ERRORS so
 * cuGetErrorName/cuGetErrorString can name it (names and texts as the real libcuda 535 prints them).
 * A new kernel needs a row in KERNELS and a case in run_kernel.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct fake_module *CUmodule;
typedef struct fake_function *CUfunction;
typedef struct fake_event *CUevent;
typedef void *CUstream;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_ECC_UNCORRECTABLE = 214,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
};

enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

#define MAX_DEVICES 8

static const struct {
    CUresult code;
    const char *name;
    const char *text; /* what the real cuGetErrorString says */
} ERRORS[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int initialised;

/* --- configuration ---------------------------------------------------------------------- */

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static double env_double(const char *name, double dflt) {
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : dflt;
}

static unsigned long long env_ull(const char *name, unsigned long long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : dflt;
}

/* Device i's item of FAKE_CUDA_DEVICES ("9.0" or "9.0@0000:3B:00.0"); 0 when there is none. */
static int device_item(int i, char *out, size_t size) {
    const char *list = getenv("FAKE_CUDA_DEVICES");
    if (!list || !*list || i < 0)
        return 0;
    for (; i > 0; i--) {
        list = strchr(list, '|');
        if (!list)
            return 0;
        list++;
    }
    size_t len = strcspn(list, "|");
    if (len >= size)
        len = size - 1;
    memcpy(out, list, len);
    out[len] = 0;
    return 1;
}

static int device_count(void) {
    char item[64];
    int n = 0;
    while (n < MAX_DEVICES && device_item(n, item, sizeof item))
        n++;
    return n;
}

#define REQUIRE_INIT                                                                                \
    do {                                                                                            \
        if (!initialised)                                                                           \
            return CUDA_ERROR_NOT_INITIALIZED;                                                      \
    } while (0)

/* --- initialisation and errors ---------------------------------------------------------- */

CUresult cuDriverGetVersion(int *driverVersion) {
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = env_int("FAKE_CUDA_VERSION", 12040);
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (env_int("FAKE_CUDA_HANG", 0) == 1)
        for (;;)
            pause();
    CUresult rc = env_int("FAKE_CUDA_INIT", device_count() ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE);
    initialised = rc == CUDA_SUCCESS;
    return rc;
}

static int error_index(CUresult error) {
    for (int i = 0; i < (int)(sizeof ERRORS / sizeof ERRORS[0]); i++)
        if (ERRORS[i].code == error)
            return i;
    return -1;
}

CUresult cuGetErrorName(CUresult error, const char **pStr) {
    int i = error_index(error);
    *pStr = i < 0 ? NULL : ERRORS[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **pStr) {
    int i = error_index(error);
    *pStr = i < 0 ? NULL : ERRORS[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* --- devices ---------------------------------------------------------------------------- */

CUresult cuDeviceGetCount(int *count) {
    REQUIRE_INIT;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    REQUIRE_INIT;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    char item[64];
    int major, minor;
    REQUIRE_INIT;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_item(dev, item, sizeof item))
        return CUDA_ERROR_INVALID_DEVICE;
    if (sscanf(item, "%d.%d", &major, &minor) != 2)
        major = 9, minor = 0;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = major; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = minor; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = env_int("FAKE_CUDA_SM_COUNT", 108); return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE; /* not faked yet */
    }
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
    char item[64];
    REQUIRE_INIT;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_item(dev, item, sizeof item))
        return CUDA_ERROR_INVALID_DEVICE;
    const char *at = strchr(item, '@');
    if (at)
        snprintf(pciBusId, len, "%s", at + 1);
    else
        snprintf(pciBusId, len, "0000:%02X:00.0", 0x18 + 0x20 * dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    char item[64];
    REQUIRE_INIT;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_item(dev, item, sizeof item))
        return CUDA_ERROR_INVALID_DEVICE;
    const char *names = getenv("FAKE_CUDA_NAMES");
    int i = dev;
    for (; names && i > 0; i--) {
        names = strchr(names, '|');
        if (names)
            names++;
    }
    if (names && *names)
        snprintf(name, len, "%.*s", (int)strcspn(names, "|"), names);
    else
        snprintf(name, len, "Fake CUDA GPU");
    return CUDA_SUCCESS;
}

#define MIB (1024ULL * 1024ULL)

static unsigned long long device_total(void) { return env_ull("FAKE_CUDA_MEM_MIB", 81559) * MIB; }

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    REQUIRE_INIT;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = device_total();
    return CUDA_SUCCESS;
}

/* --- contexts and device memory --------------------------------------------------------- */

struct allocation {
    CUdeviceptr addr;
    size_t size;    /* what was asked for */
    size_t charged; /* rounded up to the granule */
    void *host;     /* backing store, allocated when first touched */
    struct allocation *next;
};

struct fake_ctx {
    int dev;
    CUresult sticky; /* an asynchronous error: every later call in this context returns it */
    int launched;    /* a launch happened since the last synchronisation */
    int hang_armed;  /* the launch that FAKE_CUDA_HANG=sync waits on */
    struct allocation *allocs;
    unsigned long long charged;
    unsigned long long next_addr;
    unsigned int peers; /* bit d: this context enabled peer access to a context on device d */
    struct fake_ctx *next;
};

static struct fake_ctx *contexts;
static struct fake_ctx *current;
static double clock_ns[MAX_DEVICES]; /* each device's simulated time */
static int launches;

static FILE *trace(void) {
    static FILE *log;
    static int opened;
    if (!opened) {
        const char *path = getenv("FAKE_CUDA_LOG");
        log = path && *path ? fopen(path, "a") : NULL;
        opened = 1;
    }
    return log;
}

#define TRACE(...)                                                                                  \
    do {                                                                                            \
        FILE *t_ = trace();                                                                         \
        if (t_) {                                                                                   \
            fprintf(t_, __VA_ARGS__);                                                               \
            fflush(t_);                                                                             \
        }                                                                                           \
    } while (0)

/* Bytes handed out on a device: other processes, every context's overhead and allocations. */
static unsigned long long device_used(int dev) {
    unsigned long long used = env_ull("FAKE_CUDA_USED_MIB", 0) * MIB;
    for (struct fake_ctx *c = contexts; c; c = c->next)
        if (c->dev == dev)
            used += env_ull("FAKE_CUDA_CTX_MIB", 0) * MIB + c->charged;
    return used;
}

static unsigned long long device_free(int dev) {
    unsigned long long used = device_used(dev), total = device_total();
    return used >= total ? 0 : total - used;
}

static void nvml_sync(int dev) {
    char name[64], value[32];
    if (!env_int("FAKE_CUDA_NVML_SYNC", 0))
        return;
    snprintf(name, sizeof name, "FAKE_NVML_GPU%d_MEM_USED_MIB", dev);
    snprintf(value, sizeof value, "%llu", device_used(dev) / MIB);
    setenv(name, value, 1);
}

#define REQUIRE_CTX                                                                                 \
    do {                                                                                            \
        REQUIRE_INIT;                                                                               \
        if (!current)                                                                               \
            return CUDA_ERROR_INVALID_CONTEXT;                                                      \
        if (current->sticky)                                                                        \
            return current->sticky;                                                                 \
    } while (0)

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    REQUIRE_INIT;
    (void)flags;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    if (env_ull("FAKE_CUDA_CTX_MIB", 0) * MIB > device_free(dev))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fake_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = dev;
    c->next_addr = 0x7f0000000000ULL + ((unsigned long long)dev << 40);
    c->next = contexts;
    contexts = current = c;
    *pctx = c;
    nvml_sync(dev);
    TRACE("ctx_create dev=%d\n", dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
    REQUIRE_INIT;
    struct fake_ctx **pp = &contexts;
    while (*pp && *pp != ctx)
        pp = &(*pp)->next;
    if (!*pp)
        return CUDA_ERROR_INVALID_CONTEXT;
    unsigned long long leaked = 0;
    int count = 0;
    for (struct allocation *a = ctx->allocs, *n; a; a = n) {
        n = a->next;
        leaked += a->size;
        count++;
        free(a->host);
        free(a);
    }
    *pp = ctx->next;
    if (current == ctx)
        current = NULL;
    TRACE("ctx_destroy dev=%d leaked_allocations=%d leaked_bytes=%llu\n", ctx->dev, count, leaked);
    int dev = ctx->dev;
    free(ctx);
    nvml_sync(dev);
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    REQUIRE_CTX;
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *free_bytes = device_free(current->dev);
    *total_bytes = device_total();
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    REQUIRE_CTX;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long granule = env_ull("FAKE_CUDA_GRANULE", 2 * MIB);
    unsigned long long charged = (bytesize + granule - 1) / granule * granule;
    unsigned long long max_block = env_ull("FAKE_CUDA_MAX_BLOCK_MIB", 0) * MIB;
    unsigned long long oom_at = env_ull("FAKE_CUDA_OOM_AT", 0);
    CUresult rc = CUDA_SUCCESS;
    if (charged > device_free(current->dev) || (max_block && charged > max_block) ||
        (oom_at && current->charged + charged > oom_at))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    struct allocation *a = rc ? NULL : calloc(1, sizeof *a);
    if (!rc && !a)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    TRACE("alloc size=%zu rc=%d\n", bytesize, rc);
    if (rc)
        return rc;
    a->addr = current->next_addr;
    a->size = bytesize;
    a->charged = charged;
    a->next = current->allocs;
    current->allocs = a;
    current->charged += charged;
    current->next_addr += charged + granule; /* a gap, so an overrun never lands in the next block */
    *dptr = a->addr;
    nvml_sync(current->dev);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    REQUIRE_CTX;
    for (struct allocation **pp = &current->allocs; *pp; pp = &(*pp)->next) {
        struct allocation *a = *pp;
        if (a->addr != dptr)
            continue;
        *pp = a->next;
        current->charged -= a->charged;
        TRACE("free size=%zu\n", a->size);
        free(a->host);
        free(a);
        nvml_sync(current->dev);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* The host memory behind [ptr, ptr + len) of the current context, or NULL when that is not inside
 * one allocation (an illegal address). */
static void *ctx_bytes(struct fake_ctx *ctx, CUdeviceptr ptr, size_t len) {
    for (struct allocation *a = ctx->allocs; a; a = a->next) {
        if (ptr < a->addr || ptr + len > a->addr + a->size)
            continue;
        if (!a->host && !(a->host = calloc(1, a->size)))
            return NULL;
        return (char *)a->host + (ptr - a->addr);
    }
    return NULL;
}

static void *device_bytes(CUdeviceptr ptr, size_t len) { return ctx_bytes(current, ptr, len); }

/* --- pinned host memory and copies ------------------------------------------------------ */

struct pinned {
    void *p;
    size_t size;
    struct pinned *next;
};
static struct pinned *pinned_list;

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    REQUIRE_CTX;
    (void)flags;
    if (!pp || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct pinned *p = calloc(1, sizeof *p);
    if (!p || !(p->p = malloc(bytesize))) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->size = bytesize;
    p->next = pinned_list;
    pinned_list = p;
    *pp = p->p;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *ptr) {
    REQUIRE_INIT;
    for (struct pinned **pp = &pinned_list; *pp; pp = &(*pp)->next) {
        if ((*pp)->p != ptr)
            continue;
        struct pinned *p = *pp;
        *pp = p->next;
        free(p->p);
        free(p);
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static int is_pinned(const void *ptr, size_t len) {
    for (struct pinned *p = pinned_list; p; p = p->next)
        if ((const char *)ptr >= (char *)p->p && (const char *)ptr + len <= (char *)p->p + p->size)
            return 1;
    return 0;
}

static void advance(double bytes_or_flops, double per_second) {
    clock_ns[current->dev] += bytes_or_flops / per_second * 1e9;
}

static void copy_time(const void *host, size_t n) {
    double gbs = env_double("FAKE_CUDA_PCIE_GBS", 25.0);
    advance((double)n, (is_pinned(host, n) ? gbs : gbs / 2) * 1e9);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    REQUIRE_CTX;
    void *d = device_bytes(dst, n);
    if (!src || !d)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(d, src, n);
    copy_time(src, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    REQUIRE_CTX;
    void *s = device_bytes(src, n);
    if (!dst || !s)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, s, n);
    copy_time(dst, n);
    return CUDA_SUCCESS;
}

/* --- modules: a very small "JIT" -------------------------------------------------------- */

/* The kernels of the PTX files in doctor/kernels/ and their parameter lists, as PTX spells the types. */
static const struct {
    const char *name;
    const char *params;
} KERNELS[] = {
    {"saxpy", "u64,u64,u64,f32,u32"},
    {"copy_v4", "u64,u64,u64"},
    {"fma_loop", "u64,u32,f32,f32"},
};
#define N_KERNELS (int)(sizeof KERNELS / sizeof KERNELS[0])

struct fake_module {
    char *ptx;
};

struct fake_function {
    int kernel; /* index in KERNELS */
};

static void jit_log(unsigned int n, int *options, void **values, const char *text) {
    char *buf = NULL;
    size_t size = 0;
    for (unsigned int i = 0; i < n; i++) {
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
            buf = values[i];
        else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            size = (size_t)(uintptr_t)values[i];
    }
    if (buf && size)
        snprintf(buf, size, "%s", text);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, int *options,
                            void **optionValues) {
    REQUIRE_CTX;
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    const char *ptx = image;
    CUresult forced = env_int("FAKE_CUDA_JIT_ERROR", 0);
    if (forced) {
        jit_log(numOptions, options, optionValues,
                "ptxas application ptx input, line 9; fatal   : Parsing error near '.entry': syntax error");
        return forced;
    }
    const char *v = strstr(ptx, ".version");
    int major, minor, max_major, max_minor;
    if (!v || sscanf(v, ".version %d.%d", &major, &minor) != 2) {
        jit_log(numOptions, options, optionValues, "ptxas fatal   : no .version directive in the PTX input");
        return CUDA_ERROR_INVALID_PTX;
    }
    const char *isa = getenv("FAKE_CUDA_PTX_ISA");
    if (!isa || sscanf(isa, "%d.%d", &max_major, &max_minor) != 2)
        max_major = 8, max_minor = 2;
    if (major > max_major || (major == max_major && minor > max_minor)) {
        char text[160];
        snprintf(text, sizeof text, "ptxas application ptx input, line 1; fatal   : Unsupported .version %d.%d; "
                 "current version is '%d.%d'", major, minor, max_major, max_minor);
        jit_log(numOptions, options, optionValues, text);
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    struct fake_module *m = calloc(1, sizeof *m);
    if (!m || !(m->ptx = strdup(ptx))) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
    REQUIRE_INIT;
    if (!module)
        return CUDA_ERROR_INVALID_HANDLE;
    free(module->ptx);
    free(module);
    return CUDA_SUCCESS;
}

/* "u64,u64,f32" from the PTX parameter list "( .param .u64 out, .param .u64 x, .param .f32 a )". */
static void param_types(const char *list, const char *end, char *out, size_t size) {
    size_t n = 0;
    out[0] = 0;
    for (const char *p = list; p < end && (p = strstr(p, ".param")) && p < end; p += 6) {
        const char *t = p + 6;
        while (*t == ' ' || *t == '\t')
            t++;
        if (*t != '.')
            continue;
        t++;
        size_t len = strcspn(t, " \t,)\n");
        n += snprintf(out + n, size - n, "%s%.*s", n ? "," : "", (int)len, t);
        if (n >= size)
            return;
    }
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
    char pattern[128], types[128];
    REQUIRE_CTX;
    if (!hfunc || !hmod || !name)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pattern, sizeof pattern, ".entry %s(", name);
    const char *entry = strstr(hmod->ptx, pattern);
    if (!entry)
        return CUDA_ERROR_NOT_FOUND;
    const char *open = entry + strlen(pattern), *close = strchr(open, ')');
    if (!close)
        return CUDA_ERROR_INVALID_PTX;
    param_types(open, close, types, sizeof types);
    for (int k = 0; k < N_KERNELS; k++) {
        if (strcmp(KERNELS[k].name, name) != 0)
            continue;
        if (strcmp(KERNELS[k].params, types) != 0) {
            fprintf(stderr, "fake_cuda.c: %s takes (%s) in the PTX but (%s) in KERNELS: update the fake\n",
                    name, types, KERNELS[k].params);
            return CUDA_ERROR_NOT_FOUND;
        }
        struct fake_function *f = calloc(1, sizeof *f);
        if (!f)
            return CUDA_ERROR_OUT_OF_MEMORY;
        f->kernel = k;
        *hfunc = f;
        return CUDA_SUCCESS;
    }
    fprintf(stderr, "fake_cuda.c: no host implementation of the kernel %s\n", name);
    return CUDA_ERROR_NOT_FOUND;
}

/* --- kernels ---------------------------------------------------------------------------- */

static int fault_here(int kernel) {
    const char *only = getenv("FAKE_CUDA_FAULT_KERNEL");
    return !only || !*only || strcmp(only, KERNELS[kernel].name) == 0;
}

static void corrupt(int kernel, float *out, size_t n) {
    if (!fault_here(kernel))
        return;
    long long i = (long long)env_ull("FAKE_CUDA_WRONG", (unsigned long long)-1);
    if (i >= 0 && (size_t)i < n)
        out[i] += 1.0f;
}

/* What the PTX kernel does, over a 1-D grid of `threads` threads. Returns an asynchronous error. */
static CUresult run_kernel(int kernel, unsigned long long threads, void **params) {
    double mem_bw = env_double("FAKE_CUDA_MEM_BW_GBS", 1500.0) * 1e9;
    switch (kernel) {
    case 0: { /* saxpy(out, x, y, a, n): out[i] = a * x[i] + y[i] */
        CUdeviceptr out = *(CUdeviceptr *)params[0], x = *(CUdeviceptr *)params[1], y = *(CUdeviceptr *)params[2];
        float a = *(float *)params[3];
        unsigned int n = *(unsigned int *)params[4];
        size_t count = threads < n ? threads : n;
        float *o = device_bytes(out, count * 4), *xs = device_bytes(x, count * 4), *ys = device_bytes(y, count * 4);
        if (!o || !xs || !ys)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        /* a*x is exact in double (24-bit x 24-bit mantissas) and the test values are small integers, so
         * this equals the single rounding of fma.rn.f32 without calling libm's fmaf */
        for (size_t i = 0; i < count; i++)
            o[i] = (float)((double)a * xs[i] + ys[i]);
        corrupt(kernel, o, count);
        advance(12.0 * count, mem_bw);
        return CUDA_SUCCESS;
    }
    case 1: { /* copy_v4(dst, src, n16): n16 16-byte vectors, grid-stride loop */
        CUdeviceptr dst = *(CUdeviceptr *)params[0], src = *(CUdeviceptr *)params[1];
        unsigned long long n16 = *(unsigned long long *)params[2];
        void *d = device_bytes(dst, n16 * 16), *s = device_bytes(src, n16 * 16);
        if (!d || !s)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        memcpy(d, s, n16 * 16);
        corrupt(kernel, d, n16 * 4);
        advance(32.0 * n16, mem_bw);
        return CUDA_SUCCESS;
    }
    case 2: { /* fma_loop(out, iters, a, b): 8 chains x_c = (t & 1023) + c; 4 * iters times x = x*a + b */
        CUdeviceptr out = *(CUdeviceptr *)params[0];
        unsigned int iters = *(unsigned int *)params[1];
        float a = *(float *)params[2], b = *(float *)params[3];
        float *o = device_bytes(out, threads * 4);
        if (!o)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (unsigned long long t = 0; t < threads; t++) {
            float sum = 0.0f;
            for (int c = 0; c < 8; c++) {
                float x = (float)((t & 1023) + c);
                if (a == 1.0f) /* every step adds b exactly (the values stay far below 2^22): closed form */
                    x = (float)((double)x + 4.0 * iters * (double)b);
                else
                    for (unsigned long long k = 0; k < 4ULL * iters; k++)
                        x = (float)((double)x * a + b);
                sum += x;
            }
            o[t] = sum;
        }
        corrupt(kernel, o, threads);
        advance(64.0 * iters * threads, env_double("FAKE_CUDA_FP32_TFLOPS", 19.5) * 1e12);
        return CUDA_SUCCESS;
    }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

static void hang_forever(void) {
    for (;;)
        pause();
}

static void bump_nvml_ecc(int dev) {
    char name[64], value[32];
    snprintf(name, sizeof name, "FAKE_NVML_GPU%d_ECC", dev);
    snprintf(value, sizeof value, "%llu", env_ull(name, 0) + 1);
    setenv(name, value, 1);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra) {
    REQUIRE_CTX;
    (void)sharedMemBytes, (void)hStream, (void)extra;
    if (!f || !kernelParams || !gridDimX || !blockDimX || gridDimY != 1 || gridDimZ != 1 || blockDimY != 1 ||
        blockDimZ != 1 || blockDimX > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    const char *setenv_on_launch = getenv("FAKE_CUDA_LAUNCH_SETENV");
    if (launches++ == 0 && setenv_on_launch && strchr(setenv_on_launch, '=')) {
        char var[128];
        snprintf(var, sizeof var, "%.*s", (int)strcspn(setenv_on_launch, "="), setenv_on_launch);
        setenv(var, strchr(setenv_on_launch, '=') + 1, 1);
    }
    int fault = fault_here(f->kernel);
    const char *hang = getenv("FAKE_CUDA_HANG");
    if (fault && hang && strcmp(hang, "launch") == 0)
        hang_forever();
    if (fault && env_int("FAKE_CUDA_LAUNCH_ERROR", 0))
        return env_int("FAKE_CUDA_LAUNCH_ERROR", 0);
    current->launched = 1;
    current->hang_armed |= fault && hang && strcmp(hang, "sync") == 0;
    CUresult async = fault ? env_int("FAKE_CUDA_SYNC_ERROR", 0) : 0;
    if (async == CUDA_ERROR_ECC_UNCORRECTABLE)
        bump_nvml_ecc(current->dev);
    if (!async)
        async = run_kernel(f->kernel, (unsigned long long)gridDimX * blockDimX, kernelParams);
    current->sticky = async;
    return CUDA_SUCCESS;
}

static CUresult synchronise(void) {
    REQUIRE_INIT;
    if (!current)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (current->hang_armed)
        hang_forever();
    current->launched = 0;
    return current->sticky;
}

CUresult cuCtxSynchronize(void) { return synchronise(); }

/* --- events ----------------------------------------------------------------------------- */

struct fake_event {
    double t_ns;
    int recorded;
};

CUresult cuEventCreate(CUevent *ev, unsigned int flags) {
    REQUIRE_CTX;
    (void)flags;
    if (!ev)
        return CUDA_ERROR_INVALID_VALUE;
    *ev = calloc(1, sizeof **ev);
    return *ev ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuEventRecord(CUevent ev, CUstream stream) {
    REQUIRE_CTX;
    (void)stream;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    ev->t_ns = clock_ns[current->dev];
    ev->recorded = 1;
    return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent ev) {
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    return synchronise();
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    REQUIRE_CTX;
    if (!ms || !start || !end)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!start->recorded || !end->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    *ms = (float)((end->t_ns - start->t_ns) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent ev) {
    REQUIRE_INIT;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    free(ev);
    return CUDA_SUCCESS;
}

/* --- several devices: current context, peer access, peer copies ---------------------------- */

static int is_context(CUcontext ctx) {
    for (struct fake_ctx *c = contexts; c; c = c->next)
        if (c == ctx)
            return 1;
    return 0;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    REQUIRE_INIT;
    if (ctx && !is_context(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    current = ctx;
    return CUDA_SUCCESS;
}

/* Is "a-b" (or "b-a") an item of FAKE_CUDA_PEER? Unset: every pair. */
static int peer_pair(int a, int b) {
    const char *list = getenv("FAKE_CUDA_PEER");
    if (a == b)
        return 0;
    if (!list || !*list)
        return 1;
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        int x, y;
        if (sscanf(p, "%d-%d", &x, &y) == 2 && ((x == a && y == b) || (x == b && y == a)))
            return 1;
    }
    return 0;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
    REQUIRE_INIT;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count() || peerDev < 0 || peerDev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = peer_pair(dev, peerDev);
    return CUDA_SUCCESS;
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int flags) {
    REQUIRE_CTX;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!peerContext || !is_context(peerContext) || peerContext == current)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!peer_pair(current->dev, peerContext->dev))
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    if (env_int("FAKE_CUDA_PEER_ENABLE_ERROR", 0))
        return env_int("FAKE_CUDA_PEER_ENABLE_ERROR", 0);
    if (current->peers & (1u << peerContext->dev))
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    current->peers |= 1u << peerContext->dev;
    TRACE("peer_enable dev=%d peer=%d\n", current->dev, peerContext->dev);
    return CUDA_SUCCESS;
}

static double peer_gbs(int a, int b) {
    char name[64];
    snprintf(name, sizeof name, "FAKE_CUDA_PEER_GBS_%d_%d", a < b ? a : b, a < b ? b : a);
    return env_double(name, env_double("FAKE_CUDA_PEER_GBS", 40.0));
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                      size_t ByteCount) {
    REQUIRE_CTX;
    if (!is_context(dstContext) || !is_context(srcContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    void *d = ctx_bytes(dstContext, dstDevice, ByteCount), *s = ctx_bytes(srcContext, srcDevice, ByteCount);
    if (!d || !s)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(d, s, ByteCount);
    long long wrong = (long long)env_ull("FAKE_CUDA_PEER_WRONG", (unsigned long long)-1);
    if (wrong >= 0 && (size_t)wrong < ByteCount)
        ((unsigned char *)d)[wrong] ^= 0x5a;
    /* direct when either side enabled peer access to the other, else staged through host memory */
    int direct = (srcContext->peers & (1u << dstContext->dev)) || (dstContext->peers & (1u << srcContext->dev));
    double gbs = direct ? peer_gbs(srcContext->dev, dstContext->dev) : env_double("FAKE_CUDA_PCIE_GBS", 25.0) / 2;
    double ns = (double)ByteCount / (gbs * 1e9) * 1e9;
    clock_ns[srcContext->dev] += ns;
    if (dstContext->dev != srcContext->dev)
        clock_ns[dstContext->dev] += ns;
    return CUDA_SUCCESS;
}
