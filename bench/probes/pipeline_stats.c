/* bench/probes/pipeline_stats.c: what the driver made of a compute kernel, through
 * VK_KHR_pipeline_executable_properties: for each set of specialisation constants given, the
 * pipeline's executables and their statistics (on NVIDIA: registers a thread, shared memory,
 * local memory, i.e. spills, and the like), and with -i each executable's internal
 * representations written to files. A throwaway measurement kept for what it told the matrix
 * kernels' tuning (bench/RESULTS.md); not built by the Makefile:
 *   gcc -O2 -Ibuild-deps/prefix/include bench/probes/pipeline_stats.c -lvulkan -o /tmp/pipeline_stats
 *   /tmp/pipeline_stats [-i DIR] build/kernels/matmul_coopmat.spv "4=128,5=2,6=2,7=4,8=4,9=64" ...
 * Each argument after the module is one pipeline: id=value pairs separated by commas (empty: the
 * module's defaults). The device is the first with the extension;
 * cooperative matrices, 16-bit storage and arithmetic and the Vulkan memory model are enabled where
 * offered, so that nuvec's kernels compile as they do in nuvec. The layout: 16 storage buffers in
 * set 0 and 128 bytes of push constants, which covers every nuvec kernel. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define CK(x)                                                                                       \
    do {                                                                                            \
        VkResult r_ = (x);                                                                          \
        if (r_) {                                                                                   \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_);                        \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static int has_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *e = calloc(n, sizeof *e);
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e);
    int found = 0;
    for (uint32_t i = 0; i < n; i++)
        found |= !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

static uint32_t *read_spv(const char *path, size_t *bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint32_t *w = malloc((size_t)n + 4);
    if (fread(w, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        exit(1);
    }
    fclose(f);
    *bytes = (size_t)n;
    return w;
}

static void print_stat(const VkPipelineExecutableStatisticKHR *s)
{
    printf("    %-40s ", s->name);
    switch (s->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf("%s", s->value.b32 ? "true" : "false"); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf("%lld", (long long)s->value.i64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: printf("%llu", (unsigned long long)s->value.u64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: printf("%g", s->value.f64); break;
    default: printf("?");
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *irdir = NULL;
    int a = 1;
    if (a + 1 < argc && !strcmp(argv[a], "-i"))
        irdir = argv[a + 1], a += 2;
    if (a >= argc) {
        fprintf(stderr, "usage: %s [-i DIR] MODULE.spv [id=v,id=v ...]...\n", argv[0]);
        return 2;
    }
    const char *spv = argv[a++];

    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance inst;
    CK(vkCreateInstance(&ici, NULL, &inst));
    uint32_t npd = 0;
    CK(vkEnumeratePhysicalDevices(inst, &npd, NULL));
    VkPhysicalDevice pds[16];
    npd = npd > 16 ? 16 : npd;
    CK(vkEnumeratePhysicalDevices(inst, &npd, pds));
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    for (uint32_t i = 0; i < npd && !pd; i++)
        if (has_ext(pds[i], VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME))
            pd = pds[i];
    if (!pd) {
        fprintf(stderr, "no device offers %s\n", VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
        return 1;
    }
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    printf("device: %s\n", props.deviceName);

    const char *exts[4];
    uint32_t next = 0;
    exts[next++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    int coop = has_ext(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    if (coop)
        exts[next++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pef = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cmf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, .pNext = &pef,
        .cooperativeMatrix = VK_TRUE};
    /* What the device offers of 1.1-1.3's features, all enabled (as nuvec enables what it uses). */
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    f13.pNext = coop ? (void *)&cmf : (void *)&pef;
    f13.robustImageAccess = VK_FALSE; /* nuvec does not ask for robustness */

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    nq = nq > 16 ? 16 : nq;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
    uint32_t family = 0;
    for (uint32_t i = 0; i < nq; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            family = i;
            break;
        }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = family,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f2, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = next, .ppEnabledExtensionNames = exts};
    f2.features.robustBufferAccess = VK_FALSE;
    VkDevice dev;
    CK(vkCreateDevice(pd, &dci, NULL, &dev));
    PFN_vkGetPipelineExecutablePropertiesKHR get_exec =
        (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutablePropertiesKHR");
    PFN_vkGetPipelineExecutableStatisticsKHR get_stats =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR");
    PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_ir =
        (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
            dev, "vkGetPipelineExecutableInternalRepresentationsKHR");

    VkDescriptorSetLayoutBinding lb[16];
    for (uint32_t i = 0; i < 16; i++)
        lb[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                               .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 16, .pBindings = lb};
    VkDescriptorSetLayout dsl;
    CK(vkCreateDescriptorSetLayout(dev, &dli, NULL, &dsl));
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 128};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                      .pSetLayouts = &dsl, .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    VkPipelineLayout layout;
    CK(vkCreatePipelineLayout(dev, &pli, NULL, &layout));
    size_t bytes;
    uint32_t *words = read_spv(spv, &bytes);
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = bytes,
                                    .pCode = words};
    VkShaderModule mod;
    CK(vkCreateShaderModule(dev, &smi, NULL, &mod));

    for (int p = a; p < argc || p == a; p++) {
        const char *set = p < argc ? argv[p] : "";
        VkSpecializationMapEntry map[64];
        uint32_t data[64], n = 0;
        for (const char *s = set; *s && n < 64;) {
            unsigned id, v;
            int used = 0;
            if (sscanf(s, "%u=%u%n", &id, &v, &used) != 2) {
                fprintf(stderr, "bad constants '%s'\n", set);
                return 2;
            }
            map[n] = (VkSpecializationMapEntry){.constantID = id, .offset = 4 * n, .size = 4};
            data[n++] = v;
            s += used;
            if (*s == ',')
                s++;
        }
        VkSpecializationInfo spec = {.mapEntryCount = n, .pMapEntries = map, .dataSize = 4 * n, .pData = data};
        VkComputePipelineCreateInfo cpi = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR |
                     (irdir ? VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR : 0),
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = mod, .pName = "main", .pSpecializationInfo = n ? &spec : NULL},
            .layout = layout, .basePipelineIndex = -1};
        VkPipeline pipe;
        VkResult r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpi, NULL, &pipe);
        printf("pipeline [%s]: %s\n", set, r ? "failed" : "made");
        if (r) {
            printf("    vkCreateComputePipelines -> %d\n", r);
            continue;
        }
        VkPipelineInfoKHR pinfo = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipe};
        uint32_t ne = 0;
        CK(get_exec(dev, &pinfo, &ne, NULL));
        VkPipelineExecutablePropertiesKHR ep[8];
        for (uint32_t i = 0; i < 8; i++)
            ep[i] = (VkPipelineExecutablePropertiesKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
        ne = ne > 8 ? 8 : ne;
        CK(get_exec(dev, &pinfo, &ne, ep));
        for (uint32_t e = 0; e < ne; e++) {
            printf("  executable %u: %s (%s), subgroup %u\n", e, ep[e].name, ep[e].description, ep[e].subgroupSize);
            VkPipelineExecutableInfoKHR xi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = pipe,
                                              .executableIndex = e};
            uint32_t ns = 0;
            CK(get_stats(dev, &xi, &ns, NULL));
            VkPipelineExecutableStatisticKHR *st = calloc(ns ? ns : 1, sizeof *st);
            for (uint32_t i = 0; i < ns; i++)
                st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
            CK(get_stats(dev, &xi, &ns, st));
            for (uint32_t i = 0; i < ns; i++)
                print_stat(&st[i]);
            free(st);
            if (!irdir)
                continue;
            uint32_t nr = 0;
            CK(get_ir(dev, &xi, &nr, NULL));
            VkPipelineExecutableInternalRepresentationKHR *ir = calloc(nr ? nr : 1, sizeof *ir);
            for (uint32_t i = 0; i < nr; i++)
                ir[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
            CK(get_ir(dev, &xi, &nr, ir));
            for (uint32_t i = 0; i < nr; i++) {
                ir[i].pData = malloc(ir[i].dataSize + 1);
            }
            CK(get_ir(dev, &xi, &nr, ir));
            for (uint32_t i = 0; i < nr; i++) {
                char path[512];
                snprintf(path, sizeof path, "%s/p%d_e%u_%u.txt", irdir, p - a, e, i);
                FILE *f = fopen(path, "wb");
                if (f) {
                    fwrite(ir[i].pData, 1, ir[i].dataSize, f);
                    fclose(f);
                }
                printf("    representation %u: %s (%s), %zu bytes -> %s\n", i, ir[i].name, ir[i].isText ? "text" : "binary",
                       ir[i].dataSize, path);
                free(ir[i].pData);
            }
            free(ir);
        }
        vkDestroyPipeline(dev, pipe, NULL);
    }
    vkDestroyShaderModule(dev, mod, NULL);
    vkDestroyPipelineLayout(dev, layout, NULL);
    vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    free(words);
    return 0;
}
