/* vkfuncs.h: every Vulkan entry point nuvec calls, listed once (SDL's
 * SDL_gpu_vulkan_vkfuncs.h, volk). Include after defining the macros you need:
 *   NU_VK_GLOBAL(name)    loader-level, from vkGetInstanceProcAddr(NULL, ...)
 *   NU_VK_INSTANCE(name)  from vkGetInstanceProcAddr(instance, ...)
 *   NU_VK_INSTANCE_EXT(name) optional instance-level (an extension); may stay NULL
 *   NU_VK_DEVICE(name)    from vkGetDeviceProcAddr(device, ...)
 *   NU_VK_DEVICE_EXT(name)   optional device-level (an extension); may stay NULL */
#ifndef NU_VK_GLOBAL
#define NU_VK_GLOBAL(name)
#endif
#ifndef NU_VK_INSTANCE
#define NU_VK_INSTANCE(name)
#endif
#ifndef NU_VK_INSTANCE_EXT
#define NU_VK_INSTANCE_EXT(name)
#endif
#ifndef NU_VK_DEVICE
#define NU_VK_DEVICE(name)
#endif
#ifndef NU_VK_DEVICE_EXT
#define NU_VK_DEVICE_EXT(name)
#endif

NU_VK_GLOBAL(vkCreateInstance)
NU_VK_GLOBAL(vkEnumerateInstanceExtensionProperties)
NU_VK_GLOBAL(vkEnumerateInstanceLayerProperties)
NU_VK_GLOBAL(vkEnumerateInstanceVersion)

NU_VK_INSTANCE(vkDestroyInstance)
NU_VK_INSTANCE(vkEnumeratePhysicalDevices)
NU_VK_INSTANCE(vkGetPhysicalDeviceProperties)
NU_VK_INSTANCE(vkGetPhysicalDeviceProperties2)
NU_VK_INSTANCE(vkGetPhysicalDeviceFeatures2)
NU_VK_INSTANCE(vkGetPhysicalDeviceMemoryProperties)
NU_VK_INSTANCE(vkGetPhysicalDeviceMemoryProperties2)
NU_VK_INSTANCE(vkGetPhysicalDeviceQueueFamilyProperties)
NU_VK_INSTANCE(vkEnumerateDeviceExtensionProperties)
NU_VK_INSTANCE(vkCreateDevice)
NU_VK_INSTANCE(vkGetDeviceProcAddr)
NU_VK_INSTANCE_EXT(vkCreateDebugUtilsMessengerEXT)
NU_VK_INSTANCE_EXT(vkDestroyDebugUtilsMessengerEXT)
NU_VK_INSTANCE_EXT(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)

NU_VK_DEVICE(vkDestroyDevice)
NU_VK_DEVICE(vkDeviceWaitIdle)
NU_VK_DEVICE(vkGetDeviceQueue)
NU_VK_DEVICE(vkQueueSubmit)
NU_VK_DEVICE(vkQueueWaitIdle)
NU_VK_DEVICE(vkAllocateMemory)
NU_VK_DEVICE(vkFreeMemory)
NU_VK_DEVICE(vkMapMemory)
NU_VK_DEVICE(vkUnmapMemory)
NU_VK_DEVICE(vkCreateBuffer)
NU_VK_DEVICE(vkDestroyBuffer)
NU_VK_DEVICE(vkGetBufferMemoryRequirements)
NU_VK_DEVICE(vkBindBufferMemory)
NU_VK_DEVICE(vkCreateSemaphore)
NU_VK_DEVICE(vkDestroySemaphore)
NU_VK_DEVICE(vkGetSemaphoreCounterValue)
NU_VK_DEVICE(vkWaitSemaphores)
NU_VK_DEVICE(vkSignalSemaphore)
NU_VK_DEVICE(vkCreateFence)
NU_VK_DEVICE(vkDestroyFence)
NU_VK_DEVICE(vkWaitForFences)
NU_VK_DEVICE(vkResetFences)
NU_VK_DEVICE(vkCreateCommandPool)
NU_VK_DEVICE(vkDestroyCommandPool)
NU_VK_DEVICE(vkResetCommandPool)
NU_VK_DEVICE(vkAllocateCommandBuffers)
NU_VK_DEVICE(vkFreeCommandBuffers)
NU_VK_DEVICE(vkBeginCommandBuffer)
NU_VK_DEVICE(vkEndCommandBuffer)
NU_VK_DEVICE(vkResetCommandBuffer)
NU_VK_DEVICE(vkCmdCopyBuffer)
NU_VK_DEVICE(vkCmdFillBuffer)
NU_VK_DEVICE(vkCmdPipelineBarrier)
NU_VK_DEVICE(vkCmdPipelineBarrier2)
NU_VK_DEVICE(vkCmdDispatch)
NU_VK_DEVICE(vkCmdBindPipeline)
NU_VK_DEVICE(vkCmdBindDescriptorSets)
NU_VK_DEVICE(vkCmdPushConstants)
NU_VK_DEVICE(vkCreateShaderModule)
NU_VK_DEVICE(vkDestroyShaderModule)
NU_VK_DEVICE(vkCreateDescriptorSetLayout)
NU_VK_DEVICE(vkDestroyDescriptorSetLayout)
NU_VK_DEVICE(vkCreatePipelineLayout)
NU_VK_DEVICE(vkDestroyPipelineLayout)
NU_VK_DEVICE(vkCreateComputePipelines)
NU_VK_DEVICE(vkDestroyPipeline)
NU_VK_DEVICE(vkCreatePipelineCache)
NU_VK_DEVICE(vkDestroyPipelineCache)
NU_VK_DEVICE(vkGetPipelineCacheData)
NU_VK_DEVICE(vkCreateDescriptorPool)
NU_VK_DEVICE(vkDestroyDescriptorPool)
NU_VK_DEVICE(vkAllocateDescriptorSets)
NU_VK_DEVICE(vkUpdateDescriptorSets)
NU_VK_DEVICE(vkCreateQueryPool)
NU_VK_DEVICE(vkDestroyQueryPool)
NU_VK_DEVICE(vkCmdResetQueryPool)
NU_VK_DEVICE(vkResetQueryPool)
NU_VK_DEVICE(vkCmdWriteTimestamp)
NU_VK_DEVICE(vkGetQueryPoolResults)
NU_VK_DEVICE_EXT(vkCmdPushDescriptorSetKHR)
NU_VK_DEVICE_EXT(vkGetMemoryHostPointerPropertiesEXT)
NU_VK_DEVICE_EXT(vkSetDebugUtilsObjectNameEXT)
NU_VK_DEVICE_EXT(vkCmdBeginDebugUtilsLabelEXT)
NU_VK_DEVICE_EXT(vkCmdEndDebugUtilsLabelEXT)

#undef NU_VK_GLOBAL
#undef NU_VK_INSTANCE
#undef NU_VK_INSTANCE_EXT
#undef NU_VK_DEVICE
#undef NU_VK_DEVICE_EXT
