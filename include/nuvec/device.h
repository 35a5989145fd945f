/* nuvec/device.h: choosing and opening Vulkan devices, and what they offer.
 *
 * A device owns its own VkInstance, VkDevice, queues and caching allocator: several devices
 * (the same physical device too) may be open at once, and nuvec keeps no process-global state
 * except the read-only table of Vulkan loader entry points.
 *
 * Getters (nu_device_get_info, nu_device_memory_choice, nu_device_validation_errors) accept
 * NULL and return NULL or 0; nu_device_close returns NU_OK (NULL too): see nuvec/status.h.
 *
 * Thread safety: nu_device_enumerate and nu_device_open may be called from any thread. An open
 * device may be used from any number of threads at once; nu_device_close must not race with
 * any other call on that device or on its buffers. */
#ifndef NUVEC_DEVICE_H
#define NUVEC_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "status.h"

NU_BEGIN_DECLS

#define NU_MAX_MEMORY_HEAPS 16
#define NU_MAX_MEMORY_TYPES 32
#define NU_NAME_SIZE 256

typedef enum nu_device_type {
    NU_DEVICE_OTHER = 0,
    NU_DEVICE_INTEGRATED_GPU,
    NU_DEVICE_DISCRETE_GPU,
    NU_DEVICE_VIRTUAL_GPU,
    NU_DEVICE_CPU, /* such as Mesa's lavapipe */
} nu_device_type;

/* The features nuvec uses, as reported by the device (nu_device_info.features). */
typedef enum nu_feature {
    NU_FEATURE_TIMELINE_SEMAPHORE = 0, /* required: orders work across command buffers and queues */
    NU_FEATURE_SYNCHRONIZATION2,       /* required: the barriers nuvec records */
    NU_FEATURE_PUSH_DESCRIPTOR,        /* VK_KHR_push_descriptor: bind buffers without descriptor sets */
    NU_FEATURE_EXTERNAL_HOST_MEMORY,   /* VK_EXT_external_memory_host: zero-copy mapped files */
    NU_FEATURE_STORAGE_16BIT,          /* 16-bit values in storage buffers */
    NU_FEATURE_FLOAT16,                /* float16 arithmetic in shaders */
    NU_FEATURE_INT8,                   /* int8 arithmetic in shaders */
    NU_FEATURE_BFLOAT16,               /* VK_KHR_shader_bfloat16 (shaderBFloat16Type); an open device keeps it only
                                          where it enabled BF16 cooperative matrices (BF16 products on the
                                          matrix units: nu_op_matmul) */
    NU_FEATURE_COOPERATIVE_MATRIX,     /* VK_KHR_cooperative_matrix: matrix units */
    NU_FEATURE_SUBGROUP_SIZE_CONTROL,  /* choosing a kernel's subgroup size */
    NU_FEATURE_BUFFER_DEVICE_ADDRESS,  /* GPU pointers to buffers */
    NU_FEATURE_MEMORY_BUDGET,          /* VK_EXT_memory_budget: what the driver lets us use */
    NU_FEATURE_DEBUG_UTILS,            /* VK_EXT_debug_utils: names in captures and messages */
    NU_FEATURE_INTEGER_DOT_PRODUCT,    /* shaderIntegerDotProduct (Vulkan 1.3, VK_KHR_shader_integer_dot_product):
                                          4x8-bit dot products (the quantized products' fast path) */
    NU_FEATURE_VULKAN_MEMORY_MODEL,    /* vulkanMemoryModel with device scope: needed by cooperative-matrix
                                          shaders (enabled only with them) */
    NU_FEATURE_NV_COOPERATIVE_MATRIX2, /* VK_NV_cooperative_matrix2 (reported; enabled only with NUVEC_COOPMAT2=1, for bench/probes/coopmat2_matmul: no kernel uses it) */
    NU_FEATURE_COUNT
} nu_feature;

/* Memory property flags of a memory type (the Vulkan ones nuvec cares about). */
enum {
    NU_MEMORY_DEVICE_LOCAL = 1u << 0,
    NU_MEMORY_HOST_VISIBLE = 1u << 1,
    NU_MEMORY_HOST_COHERENT = 1u << 2,
    NU_MEMORY_HOST_CACHED = 1u << 3,
    NU_MEMORY_LAZILY_ALLOCATED = 1u << 4,
    NU_MEMORY_PROTECTED = 1u << 5,
};

typedef struct nu_memory_heap_info {
    uint64_t size;      /* bytes */
    bool device_local;
} nu_memory_heap_info;

typedef struct nu_memory_type_info {
    uint32_t heap;      /* index into nu_device_info.heaps */
    uint32_t flags;     /* NU_MEMORY_* */
} nu_memory_type_info;

/* Subgroup operations (VkSubgroupFeatureFlagBits, same values). */
enum {
    NU_SUBGROUP_BASIC = 1u << 0,
    NU_SUBGROUP_VOTE = 1u << 1,
    NU_SUBGROUP_ARITHMETIC = 1u << 2,
    NU_SUBGROUP_BALLOT = 1u << 3,
    NU_SUBGROUP_SHUFFLE = 1u << 4,
    NU_SUBGROUP_SHUFFLE_RELATIVE = 1u << 5,
    NU_SUBGROUP_CLUSTERED = 1u << 6,
    NU_SUBGROUP_QUAD = 1u << 7,
};

/* A product the device's matrix units do per subgroup (VK_KHR_cooperative_matrix, subgroup scope):
 * result[m x n] = a[m x k] * b[k x n] + c[m x n], elements of the given dtypes (NU_DTYPE_COUNT for
 * a component type nuvec has no dtype for). */
typedef struct nu_cooperative_matrix_shape {
    uint32_t m, n, k;
    nu_dtype a, b, c, result;
    bool saturating; /* integer products clamp instead of wrapping */
} nu_cooperative_matrix_shape;
#define NU_MAX_COOPERATIVE_MATRIX_SHAPES 64

typedef struct nu_device_info {
    uint32_t index;                /* position among the system's Vulkan devices */
    char name[NU_NAME_SIZE];
    char driver_name[NU_NAME_SIZE];
    char driver_info[NU_NAME_SIZE];
    uint32_t vendor_id, device_id;
    uint32_t api_version;          /* VK_MAKE_API_VERSION encoding */
    uint32_t driver_version;       /* vendor-specific encoding */
    nu_device_type type;
    bool unified_memory;           /* the CPU and the device share memory (integrated or CPU) */

    uint32_t heap_count;
    nu_memory_heap_info heaps[NU_MAX_MEMORY_HEAPS];
    uint32_t memory_type_count;
    nu_memory_type_info memory_types[NU_MAX_MEMORY_TYPES];

    bool features[NU_FEATURE_COUNT];
    /* What NU_FEATURE_COOPERATIVE_MATRIX offers (0 shapes without it). An open device under a
     * validation layer older than the extension (1.3.255; Debian 12 ships 1.3.239) leaves it off
     * and reports neither the feature nor shapes: that layer would report every use as an error.
     * BF16 shapes are listed with NU_FEATURE_BFLOAT16 only (the same rule, layer 1.4.313). */
    uint32_t cooperative_matrix_count;
    nu_cooperative_matrix_shape cooperative_matrix[NU_MAX_COOPERATIVE_MATRIX_SHAPES];

    /* Limits. */
    uint32_t subgroup_size, min_subgroup_size, max_subgroup_size;
    /* The subgroup operations compute shaders may use: NU_SUBGROUP_* bits (0 where compute
     * shaders have no subgroup operations). */
    uint32_t subgroup_operations;
    uint32_t max_workgroup_count[3];
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_invocations;
    uint32_t max_shared_memory;          /* bytes of workgroup-shared memory */
    uint32_t max_push_constants;         /* bytes */
    uint64_t max_storage_buffer_range;   /* bytes one binding may cover */
    uint64_t max_allocation_size;        /* bytes one vkAllocateMemory may take */
    uint32_t max_allocation_count;       /* vkAllocateMemory calls alive at once */
    uint64_t min_storage_buffer_offset_alignment;
    uint64_t min_imported_host_pointer_alignment; /* 0 without external host memory */
    uint64_t non_coherent_atom_size;
    float timestamp_period;              /* nanoseconds per GPU timestamp tick */
    /* Compute units where the driver reports them: NVIDIA's SMs (VK_NV_shader_sm_builtins), AMD's
     * CUs (VK_AMD_shader_core_properties), Arm's shader cores (VK_ARM_shader_core_builtins);
     * 0: unknown. nu_kernel_resident_groups builds on it. */
    uint32_t compute_units;

    /* Queues: one compute queue, and a transfer queue where the device has a separate
     * transfer-only family (otherwise transfers use the compute queue). */
    uint32_t compute_queue_family;
    uint32_t transfer_queue_family;
    bool separate_transfer_queue;
} nu_device_info;

/* Which memory shared buffers live in, on devices where that is a choice (a discrete GPU
 * whose device-local memory is also host-visible: resizable BAR). */
typedef enum nu_shared_memory {
    NU_SHARED_MEMORY_AUTO = 0, /* default: measured at open (see nu_device_memory_choice) */
    NU_SHARED_MEMORY_HOST,     /* host memory: fast CPU reads, GPU reads over the bus */
    NU_SHARED_MEMORY_DEVICE,   /* device-local host-visible memory: fast GPU, slow CPU reads */
} nu_shared_memory;

typedef struct nu_device_desc {
    /* Which device: an index ("1") or a case-insensitive name substring ("llvmpipe", "H200").
     * NULL: the NUVEC_DEVICE environment variable, or else the default order (discrete GPU,
     * integrated GPU, virtual GPU, CPU). An unknown name or index fails with NU_ERROR_NO_DEVICE. */
    const char *select;
    /* Load the Khronos validation layer with synchronisation validation, and count each error
     * it reports (nu_device_validation_errors). Also on with NUVEC_VALIDATION=1. Default off. */
    bool validation;
    /* Where shared buffers live (default NU_SHARED_MEMORY_AUTO). */
    nu_shared_memory shared_memory;
    /* Bytes of memory blocks the allocator sub-allocates from (0: 64 MiB, at most 1/8 of the
     * smallest heap used); requests up to a quarter of it are carved from blocks, larger ones get
     * memory of their own. A memory kind's first block is 2 MiB, each next one twice the one
     * before up to this size. */
    uint64_t block_size;
} nu_device_desc;

/* Lists the system's Vulkan devices: up to `capacity` entries into `infos` (may be NULL with
 * capacity 0), and the total into `*count`. */
nu_status nu_device_enumerate(nu_device_info *infos, uint32_t capacity, uint32_t *count);

/* Opens a device (desc may be NULL for all defaults).
 * The Vulkan drivers and layers loaded for the process's first device (or enumeration) stay
 * loaded until the process exits, so later devices load nothing again (some drivers, NVIDIA's,
 * can be loaded only ~32 times per process). Limit: what the application itself loaded
 * through its own Vulkan calls before nuvec's first is not kept by nuvec, and is unloaded
 * when the application's last instance and nuvec's are gone. */
nu_status nu_device_open(const nu_device_desc *desc, nu_device **out);

/* Closes a device: waits for its GPU work and releases all its device memory, that of buffers,
 * kernels and command buffers not yet freed included; their handles become invalid. Free
 * them first to release their host structures too (those of buffers go with the device, but
 * the mapping of a mapped file not freed stays). NU_OK (NULL is ignored). */
nu_status nu_device_close(nu_device *device);

/* Blocks until every committed command buffer of the device completed: NU_OK, or
 * NU_ERROR_TIMEOUT after timeout_ns (NU_WAIT_FOREVER: no bound), NU_ERROR_DEVICE_LOST. */
nu_status nu_device_wait_idle(nu_device *device, uint64_t timeout_ns);

/* What the device is and offers (NULL for a NULL device). */
const nu_device_info *nu_device_get_info(const nu_device *device);

/* The memory types nuvec chose: for shared and for private buffers, and a sentence saying
 * why (what was measured, and whether device-local host-visible memory is used). */
typedef struct nu_memory_choice {
    uint32_t shared_type;
    uint32_t private_type;
    bool shared_device_local;    /* shared buffers live in device-local memory */
    double measured_read_gbps[2];  /* CPU read bandwidth measured: [0] host, [1] device-local; 0 if not measured */
    double measured_write_gbps[2]; /* CPU write bandwidth measured, likewise */
    char reason[NU_NAME_SIZE];
} nu_memory_choice;
const nu_memory_choice *nu_device_memory_choice(const nu_device *device); /* NULL for NULL */

/* What the driver lets the process use of each memory heap now, and what the process uses of it
 * (all of its allocations, nuvec's and any other): VK_EXT_memory_budget's heapBudget and
 * heapUsage where the device has it (NU_FEATURE_MEMORY_BUDGET; from_driver true). Without it the
 * budget is the heap's size and the usage is not known (0; from_driver false): nu_memory_stats'
 * `reserved` is then the best figure of nuvec's own use. */
typedef struct nu_memory_budget {
    uint32_t heap_count;
    uint64_t budget[NU_MAX_MEMORY_HEAPS];
    uint64_t usage[NU_MAX_MEMORY_HEAPS];
    bool from_driver;
} nu_memory_budget;
/* NU_ERROR_INVALID_ARGUMENT for NULL pointers (*out cleared). */
nu_status nu_device_memory_budget(nu_device *device, nu_memory_budget *out);

/* Errors the validation layer reported so far (always 0 without validation, and for NULL). */
uint32_t nu_device_validation_errors(const nu_device *device);

/* A short name: "discrete GPU", "CPU", ... */
const char *nu_device_type_name(nu_device_type type);
/* The feature's Vulkan-style name: "timelineSemaphore", "VK_EXT_external_memory_host", ... */
const char *nu_feature_name(nu_feature feature);

NU_END_DECLS
#endif
