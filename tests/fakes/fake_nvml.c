/* A fake libnvidia-ml.so.1 for tests: the real pynvml bindings call it exactly as they call NVML.
 *
 * Built by tests/test_native.py with `cc -shared -fPIC -O1 -o DIR/libnvidia-ml.so.1 fake_nvml.c`
 * and found first through LD_LIBRARY_PATH=DIR. Struct layouts follow nvml.h (and the ctypes
 * structures in pynvml.py, which must agree with it). Every answer comes from the environment:
 *
 *   FAKE_NVML_HANG=1               nvmlInit* never returns (a wedged driver)
 *   FAKE_NVML_INIT_ERROR=N         nvmlInit* returns N (9 driver not loaded, 18 version mismatch)
 *   FAKE_NVML_DRIVER=550.54.15     nvmlSystemGetDriverVersion
 *   FAKE_NVML_CUDA=12040           nvmlSystemGetCudaDriverVersion
 *   FAKE_NVML_GPUS=NAME|NAME       one GPU per name, in index order (unset: no GPU)
 *
 * and per GPU i, FAKE_NVML_GPU<i>_<KEY> (defaults: a healthy idle H100 in a x16 gen-5 slot):
 *   UUID, BUS (PCI bus number), PCI_DEVICE_ID, CC ("9.0"), MEM_TOTAL_MIB, MEM_USED_MIB,
 *   PERSISTENCE, ECC (uncorrected, volatile), REMAP_PENDING, TEMP, UTIL (percent), POWER_MW, PCIE_GEN, PCIE_GEN_MAX,
 *   PCIE_WIDTH, PCIE_WIDTH_MAX, THROTTLE (reason bit mask), HANDLE (only "err:N"),
 *   PROCS  "PID:MIB,PID:MIB" compute processes ("PID:?" = memory not available),
 *   MIG    "PROFILE:MIB|PROFILE:MIB" MIG mode on, with these MIG devices.
 * A numeric knob set to "err:N" makes its call fail with nvmlReturn_t N (3 = not supported).
 *
 * Topology (the multi-GPU checks, like `nvidia-smi topo -m`):
 *   FAKE_NVML_TOPO=NODE              nvmlDeviceGetTopologyCommonAncestor for every pair of distinct GPUs:
 *                                    PIX, PXB, PHB, NODE or SYS (or a number, or "err:N")
 *   FAKE_NVML_TOPO_<i>_<j>=PIX       that answer for the pair i < j
 *   FAKE_NVML_GPU<i>_NVLINK=1,1,2:down  GPU i's NVLink links in link order: the GPU at the other end of each,
 *                                    ":down" for an inactive link (nvmlDeviceGetNvLinkState 0). Unset: no NVLink
 *                                    (every NVLink call answers NOT_SUPPORTED); a link number past the list is
 *                                    INVALID_ARGUMENT, as on a GPU with fewer links than NVML_NVLINK_MAX_LINKS
 *   FAKE_NVML_GPU<i>_NVLINK_VERSION=4  nvmlDeviceGetNvLinkVersion of every link of GPU i
 *
 * Deliberately absent: nvmlDeviceGetRetiredPagesPendingStatus (pynvml then raises
 * FunctionNotFound, as with an old driver), and everything the probe does not ask for.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_UNKNOWN_REMOTE = 999, /* a link to something that is not one of our GPUs: NVML_ERROR_UNKNOWN */
};

#define MAX_GPUS 8
#define MAX_MIG 7

/* An nvmlDevice_t points at one of these. */
typedef struct fake_device {
    int gpu;
    int mig; /* -1: the whole GPU */
} *nvmlDevice_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

static struct fake_device gpus[MAX_GPUS];
static struct fake_device migs[MAX_GPUS][MAX_MIG];
static int initialised;

/* --- configuration ---------------------------------------------------------------------- */

/* Item i of a list separated by sep, copied into out; 0 when there is no such item. */
static int list_item(const char *list, char sep, int i, char *out, size_t size) {
    if (!list || !*list)
        return 0;
    for (; i > 0; i--) {
        list = strchr(list, sep);
        if (!list)
            return 0;
        list++;
    }
    size_t len = strcspn(list, (char[]){sep, 0});
    if (len >= size)
        len = size - 1;
    memcpy(out, list, len);
    out[len] = 0;
    return 1;
}

static int gpu_count(void) {
    char name[96];
    int n = 0;
    while (n < MAX_GPUS && list_item(getenv("FAKE_NVML_GPUS"), '|', n, name, sizeof name))
        n++;
    return n;
}

static const char *gpu_knob(int gpu, const char *key) {
    char var[64];
    snprintf(var, sizeof var, "FAKE_NVML_GPU%d_%s", gpu, key);
    return getenv(var);
}

/* A numeric knob of a GPU: its value (or dflt) in *out, or the error "err:N" asks for. */
static nvmlReturn_t number(nvmlDevice_t dev, const char *key, unsigned long long dflt, unsigned long long *out) {
    const char *v = gpu_knob(dev->gpu, key);
    if (v && strncmp(v, "err:", 4) == 0)
        return atoi(v + 4);
    *out = v ? strtoull(v, NULL, 0) : dflt;
    return NVML_SUCCESS;
}

static nvmlReturn_t uint_knob(nvmlDevice_t dev, const char *key, unsigned int dflt, unsigned int *out) {
    unsigned long long value;
    nvmlReturn_t rc = number(dev, key, dflt, &value);
    if (rc == NVML_SUCCESS)
        *out = (unsigned int)value;
    return rc;
}

static int valid(nvmlDevice_t dev) {
    return initialised && dev && dev->gpu >= 0 && dev->gpu < gpu_count();
}

#define CHECK(dev, ptr)                                                                             \
    do {                                                                                            \
        if (!initialised)                                                                           \
            return NVML_ERROR_UNINITIALIZED;                                                        \
        if (!valid(dev) || !(ptr))                                                                  \
            return NVML_ERROR_INVALID_ARGUMENT;                                                     \
    } while (0)

/* --- library ---------------------------------------------------------------------------- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *hang = getenv("FAKE_NVML_HANG");
    if (hang && strcmp(hang, "1") == 0)
        for (;;)
            pause();
    const char *err = getenv("FAKE_NVML_INIT_ERROR");
    if (err && atoi(err) != 0)
        return atoi(err);
    for (int i = 0; i < MAX_GPUS; i++) {
        gpus[i] = (struct fake_device){i, -1};
        for (int j = 0; j < MAX_MIG; j++)
            migs[i][j] = (struct fake_device){i, j};
    }
    initialised = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    initialised = 0;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 18: return "Driver/library version mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    const char *v = getenv("FAKE_NVML_DRIVER");
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (snprintf(version, length, "%s", v ? v : "550.54.15") >= (int)length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    const char *v = getenv("FAKE_NVML_CUDA");
    *cudaDriverVersion = v ? atoi(v) : 12040;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* --- devices ---------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    *deviceCount = gpu_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned int)gpu_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *v = gpu_knob(index, "HANDLE");
    if (v && strncmp(v, "err:", 4) == 0)
        return atoi(v + 4);
    *device = &gpus[index];
    return NVML_SUCCESS;
}

/* A MIG device's profile ("3g.40gb") and memory, from FAKE_NVML_GPU<i>_MIG. */
static int mig_item(nvmlDevice_t dev, char *profile, size_t size, unsigned long long *mib) {
    char item[64];
    if (!list_item(gpu_knob(dev->gpu, "MIG"), '|', dev->mig, item, sizeof item))
        return 0;
    char *colon = strchr(item, ':');
    *mib = colon ? strtoull(colon + 1, NULL, 0) : 0;
    if (colon)
        *colon = 0;
    snprintf(profile, size, "%s", item);
    return 1;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    char gpu_name[96], profile[64];
    unsigned long long mib;
    CHECK(device, name);
    list_item(getenv("FAKE_NVML_GPUS"), '|', device->gpu, gpu_name, sizeof gpu_name);
    if (device->mig >= 0 && mig_item(device, profile, sizeof profile, &mib))
        snprintf(name, length, "%s MIG %s", gpu_name, profile);
    else
        snprintf(name, length, "%s", gpu_name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    CHECK(device, uuid);
    const char *v = gpu_knob(device->gpu, "UUID");
    if (device->mig >= 0)
        snprintf(uuid, length, "MIG-fa4e%04x-0000-4000-8000-%012x", device->gpu, device->mig);
    else if (v)
        snprintf(uuid, length, "%s", v);
    else
        snprintf(uuid, length, "GPU-fa4e%04x-0000-4000-8000-000000000000", device->gpu);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    unsigned int bus;
    nvmlReturn_t rc;
    CHECK(device, pci);
    memset(pci, 0, sizeof *pci);
    device = &gpus[device->gpu]; /* a MIG device reports its GPU's address */
    if ((rc = uint_knob(device, "BUS", 0x18 + 0x20 * device->gpu, &bus)) != NVML_SUCCESS)
        return rc;
    pci->bus = bus;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", bus);
    pci->pciSubSystemId = 0x16C110DE;
    return uint_knob(device, "PCI_DEVICE_ID", 0x233010DE, &pci->pciDeviceId);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    CHECK(device, major && minor);
    const char *v = gpu_knob(device->gpu, "CC");
    if (v && strncmp(v, "err:", 4) == 0)
        return atoi(v + 4);
    if (!v || sscanf(v, "%d.%d", major, minor) != 2)
        *major = 9, *minor = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    unsigned long long total, used;
    nvmlReturn_t rc;
    char profile[64];
    CHECK(device, memory);
    if (device->mig >= 0) {
        if (!mig_item(device, profile, sizeof profile, &total))
            return NVML_ERROR_NOT_FOUND;
        used = 0;
    } else if ((rc = number(device, "MEM_TOTAL_MIB", 81559, &total)) != NVML_SUCCESS ||
               (rc = number(device, "MEM_USED_MIB", 512, &used)) != NVML_SUCCESS) {
        return rc;
    }
    memory->total = total << 20;
    memory->used = used << 20;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    CHECK(device, currentMode && pendingMode);
    *currentMode = *pendingMode = gpu_knob(device->gpu, "MIG") != NULL;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    CHECK(device, count);
    *count = gpu_knob(device->gpu, "MIG") ? MAX_MIG : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice) {
    char item[64];
    CHECK(device, migDevice);
    if (index >= MAX_MIG)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!list_item(gpu_knob(device->gpu, "MIG"), '|', index, item, sizeof item))
        return NVML_ERROR_NOT_FOUND; /* a slot no MIG instance occupies */
    *migDevice = &migs[device->gpu][index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, unsigned int *mode) {
    CHECK(device, mode);
    return uint_knob(device, "PERSISTENCE", 1, mode);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                         unsigned long long *eccCounts) {
    CHECK(device, eccCounts);
    if (errorType == 1 && counterType == 0) /* only uncorrected/volatile is configurable */
        return number(device, "ECC", 0, eccCounts);
    *eccCounts = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                       unsigned int *isPending, unsigned int *failureOccurred) {
    CHECK(device, corrRows && uncRows && isPending && failureOccurred);
    *corrRows = *uncRows = *failureOccurred = 0;
    return uint_knob(device, "REMAP_PENDING", 0, isPending);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp) {
    CHECK(device, temp);
    if (sensorType != 0) /* NVML_TEMPERATURE_GPU */
        return NVML_ERROR_INVALID_ARGUMENT;
    return uint_knob(device, "TEMP", 34, temp);
}

/* nvmlUtilization_t: { unsigned int gpu; unsigned int memory; } */
typedef struct { unsigned int gpu; unsigned int memory; } nvmlUtilization_t;

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    CHECK(device, util);
    util->memory = 0;
    return uint_knob(device, "UTIL", 0, &util->gpu);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    CHECK(device, power);
    return uint_knob(device, "POWER_MW", 71500, power);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen) {
    CHECK(device, gen);
    return uint_knob(device, "PCIE_GEN", 5, gen);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen) {
    CHECK(device, gen);
    return uint_knob(device, "PCIE_GEN_MAX", 5, gen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *width) {
    CHECK(device, width);
    return uint_knob(device, "PCIE_WIDTH", 16, width);
}

nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *width) {
    CHECK(device, width);
    return uint_knob(device, "PCIE_WIDTH_MAX", 16, width);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons) {
    CHECK(device, reasons);
    return number(device, "THROTTLE", 0, reasons);
}

/* The name since R535; the old one stays exported for old callers. */
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons) {
    return nvmlDeviceGetCurrentClocksThrottleReasons(device, reasons);
}

/* NVML's two-call protocol: a count that is too small gets INSUFFICIENT_SIZE and the real count. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos) {
    char item[64];
    unsigned int n = 0;
    CHECK(device, infoCount);
    const char *list = gpu_knob(device->gpu, "PROCS");
    if (list && strncmp(list, "err:", 4) == 0)
        return atoi(list + 4);
    while (list_item(list, ',', n, item, sizeof item))
        n++;
    if (n > 0 && (*infoCount < n || !infos)) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++) {
        list_item(list, ',', i, item, sizeof item);
        const char *mib = strchr(item, ':');
        infos[i] = (nvmlProcessInfo_t){
            .pid = (unsigned int)strtoul(item, NULL, 10),
            /* NVML_VALUE_NOT_AVAILABLE: the memory of a process the driver cannot account (WDDM) */
            .usedGpuMemory = mib && mib[1] != '?' ? strtoull(mib + 1, NULL, 0) << 20 : ULLONG_MAX,
            .gpuInstanceId = 0xFFFFFFFF,
            .computeInstanceId = 0xFFFFFFFF,
        };
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

/* --- topology and NVLink ---------------------------------------------------------------- */

typedef enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;

static int topo_level(const char *v, int *level) {
    static const struct {
        const char *name;
        int level;
    } NAMES[] = {{"PIX", 10}, {"PXB", 20}, {"PHB", 30}, {"NODE", 40}, {"SYS", 50}};
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (strcmp(v, NAMES[i].name) == 0)
            return *level = NAMES[i].level, 1;
    char *end;
    long n = strtol(v, &end, 0);
    if (end == v || *end)
        return 0;
    *level = (int)n;
    return 1;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo) {
    char var[64];
    int level;
    CHECK(device1, pathInfo);
    if (!valid(device2))
        return NVML_ERROR_INVALID_ARGUMENT;
    int a = device1->gpu, b = device2->gpu;
    if (a == b)
        return *pathInfo = NVML_TOPOLOGY_INTERNAL, NVML_SUCCESS;
    snprintf(var, sizeof var, "FAKE_NVML_TOPO_%d_%d", a < b ? a : b, a < b ? b : a);
    const char *v = getenv(var);
    if (!v)
        v = getenv("FAKE_NVML_TOPO");
    if (!v)
        v = "NODE";
    if (strncmp(v, "err:", 4) == 0)
        return atoi(v + 4);
    if (!topo_level(v, &level))
        return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = (nvmlGpuTopologyLevel_t)level;
    return NVML_SUCCESS;
}

/* Link `link` of the GPU: the remote GPU index and whether it is up; an NVML error when there is none. */
static nvmlReturn_t nvlink(nvmlDevice_t dev, unsigned int link, int *remote, int *up) {
    char item[32];
    const char *list = gpu_knob(dev->gpu, "NVLINK");
    if (!list)
        return NVML_ERROR_NOT_SUPPORTED;
    if (strncmp(list, "err:", 4) == 0)
        return atoi(list + 4);
    if (!list_item(list, ',', (int)link, item, sizeof item))
        return NVML_ERROR_INVALID_ARGUMENT;
    *remote = atoi(item);
    *up = strstr(item, ":down") == NULL;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, unsigned int *isActive) {
    int remote, up;
    CHECK(device, isActive);
    nvmlReturn_t rc = nvlink(device, link, &remote, &up);
    if (rc == NVML_SUCCESS)
        *isActive = up ? 1 : 0; /* NVML_FEATURE_ENABLED / _DISABLED */
    return rc;
}

nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link, unsigned int *version) {
    int remote, up;
    CHECK(device, version);
    nvmlReturn_t rc = nvlink(device, link, &remote, &up);
    if (rc != NVML_SUCCESS)
        return rc;
    return uint_knob(device, "NVLINK_VERSION", 4, version);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
    int remote, up;
    CHECK(device, pci);
    nvmlReturn_t rc = nvlink(device, link, &remote, &up);
    if (rc != NVML_SUCCESS)
        return rc;
    if (remote < 0 || remote >= gpu_count())
        return NVML_ERROR_UNKNOWN_REMOTE;
    return nvmlDeviceGetPciInfo_v3(&gpus[remote], pci);
}
