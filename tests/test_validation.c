/* test_validation.c: the canary. The tests rely on the Khronos validation layer (with
 * synchronisation validation) failing them on any error; this proves that a deliberately
 * wrong use is caught: a fill of a buffer right after a dispatch that writes it, with no
 * barrier (the hazard kind the lavapipe-era layer, 1.3.239, is known to catch; see DESIGN.md
 * §3). The same commands with the barrier must report nothing. */
#include "harness.h"

#include <string.h>

#include <stdio.h>

#include "memory/buffer.h"
#include "vk/device.h"
#include "kernel/builtins.h"

typedef struct raw {
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkShaderModule module;
    VkPipeline pipeline;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
} raw;

static void create(nu_device *d, nu_buffer *b, raw *r)
{
    const nu__vk_device *vk = &d->vkd;
    VkDescriptorSetLayoutBinding binding = {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 1, .pBindings = &binding};
    assert_int_equal(vk->vkCreateDescriptorSetLayout(d->device, &dli, NULL, &r->dsl), VK_SUCCESS);
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 8};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                      .pSetLayouts = &r->dsl, .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &pcr};
    assert_int_equal(vk->vkCreatePipelineLayout(d->device, &pli, NULL, &r->layout), VK_SUCCESS);
    const nu__kernel_spirv *k = nu__kernel_find("fill_u32");
    assert_non_null(k);
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = k->word_count * 4, .pCode = k->words};
    assert_int_equal(vk->vkCreateShaderModule(d->device, &smi, NULL, &r->module), VK_SUCCESS);
    VkComputePipelineCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = r->module, .pName = "main"},
        .layout = r->layout};
    assert_int_equal(vk->vkCreateComputePipelines(d->device, VK_NULL_HANDLE, 1, &cpi, NULL, &r->pipeline),
                     VK_SUCCESS);
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    assert_int_equal(vk->vkCreateDescriptorPool(d->device, &dpi, NULL, &r->pool), VK_SUCCESS);
    VkDescriptorSetAllocateInfo dsi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = r->pool, .descriptorSetCount = 1, .pSetLayouts = &r->dsl};
    assert_int_equal(vk->vkAllocateDescriptorSets(d->device, &dsi, &r->set), VK_SUCCESS);
    VkBuffer vb;
    VkDeviceSize off;
    NT_OK(nu__buffer_binding(b, &vb, &off));
    VkDescriptorBufferInfo bi = {.buffer = vb, .offset = off, .range = nu_buffer_size(b)};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = r->set,
                              .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              .pBufferInfo = &bi};
    vk->vkUpdateDescriptorSets(d->device, 1, &w, 0, NULL);
    VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = d->compute->family};
    assert_int_equal(vk->vkCreateCommandPool(d->device, &cpci, NULL, &r->cmd_pool), VK_SUCCESS);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = r->cmd_pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    assert_int_equal(vk->vkAllocateCommandBuffers(d->device, &cai, &r->cmd), VK_SUCCESS);
}

static void destroy(nu_device *d, raw *r)
{
    const nu__vk_device *vk = &d->vkd;
    vk->vkDestroyCommandPool(d->device, r->cmd_pool, NULL);
    vk->vkDestroyDescriptorPool(d->device, r->pool, NULL);
    vk->vkDestroyPipeline(d->device, r->pipeline, NULL);
    vk->vkDestroyShaderModule(d->device, r->module, NULL);
    vk->vkDestroyPipelineLayout(d->device, r->layout, NULL);
    vk->vkDestroyDescriptorSetLayout(d->device, r->dsl, NULL);
}

/* Records dispatch(fill 1) then vkCmdFillBuffer(2) on the same bytes, with or without the
 * barrier between them, submits, waits, and returns the buffer's first word. */
static uint32_t run(nu_device *d, nu_buffer *b, raw *r, bool barrier)
{
    const nu__vk_device *vk = &d->vkd;
    VkBuffer vb;
    VkDeviceSize off;
    NT_OK(nu__buffer_binding(b, &vb, &off));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    assert_int_equal(vk->vkBeginCommandBuffer(r->cmd, &begin), VK_SUCCESS);
    vk->vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->pipeline);
    vk->vkCmdBindDescriptorSets(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->layout, 0, 1, &r->set, 0, NULL);
    uint32_t pc[2] = {1, (uint32_t)(nu_buffer_size(b) / 4)};
    vk->vkCmdPushConstants(r->cmd, r->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, pc);
    vk->vkCmdDispatch(r->cmd, (pc[1] + 255) / 256, 1, 1);
    if (barrier) {
        VkMemoryBarrier2 mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
                               .srcStageMask = VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                               .srcAccessMask = VK_ACCESS_2_SHADER_STORAGE_WRITE_BIT,
                               .dstStageMask = VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT,
                               .dstAccessMask = VK_ACCESS_2_TRANSFER_WRITE_BIT};
        VkDependencyInfo dep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1,
                                .pMemoryBarriers = &mb};
        vk->vkCmdPipelineBarrier2(r->cmd, &dep);
    }
    vk->vkCmdFillBuffer(r->cmd, vb, off, nu_buffer_size(b), 2);
    VkMemoryBarrier2 host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER_2,
                             .srcStageMask = VK_PIPELINE_STAGE_2_ALL_TRANSFER_BIT,
                             .srcAccessMask = VK_ACCESS_2_TRANSFER_WRITE_BIT,
                             .dstStageMask = VK_PIPELINE_STAGE_2_HOST_BIT,
                             .dstAccessMask = VK_ACCESS_2_HOST_READ_BIT};
    VkDependencyInfo hdep = {.sType = VK_STRUCTURE_TYPE_DEPENDENCY_INFO, .memoryBarrierCount = 1,
                             .pMemoryBarriers = &host};
    vk->vkCmdPipelineBarrier2(r->cmd, &hdep);
    assert_int_equal(vk->vkEndCommandBuffer(r->cmd), VK_SUCCESS);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &r->cmd};
    assert_int_equal(vk->vkQueueSubmit(d->compute->queue, 1, &si, VK_NULL_HANDLE), VK_SUCCESS);
    assert_int_equal(vk->vkQueueWaitIdle(d->compute->queue), VK_SUCCESS);
    uint32_t v = 0;
    NT_OK(nu_buffer_read(b, 0, &v, 4));
    return v;
}

static void correct_commands_report_nothing(void **state)
{
    nu_device *d = nt_open();
    nu_buffer *b;
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &b));
    raw r;
    create(d, b, &r);
    assert_int_equal(run(d, b, &r, true), 2);
    destroy(d, &r);
    NT_OK(nu_buffer_free(b));
    nt_close(d); /* fails the test on any validation error */
}

static void a_fill_after_a_dispatch_without_a_barrier_is_caught(void **state)
{
    nu_device *d = nt_open();
    nu_buffer *b;
    NT_OK(nu_buffer_new(d, 4096, NU_STORAGE_SHARED, &b));
    raw r;
    create(d, b, &r);
    assert_int_equal(nu_device_validation_errors(d), 0);
    fprintf(stderr, "test_validation: the next validation error is expected (a deliberate hazard)\n");
    run(d, b, &r, false);
    uint32_t errors = nu_device_validation_errors(d);
    const char *msg = nu_error_message(d);
    assert_true(errors >= 1);
    assert_non_null(strstr(msg, "WRITE_AFTER_WRITE"));
    destroy(d, &r);
    NT_OK(nu_buffer_free(b));
    nu_device_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(correct_commands_report_nothing),
        cmocka_unit_test(a_fill_after_a_dispatch_without_a_barrier_is_caught),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
