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
 * To extend (a smoke test, an out-of-memory probe): add the entry point below the device section,
 * start it with REQUIRE_INIT, read its knob with env_int, and add any new CUresult to ERRORS so
 * cuGetErrorName/cuGetErrorString can name it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
};

enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

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
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
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
