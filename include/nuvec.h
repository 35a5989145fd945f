/* nuvec: a GPU compute runtime on Vulkan. This header includes every public module. */
#ifndef NUVEC_H
#define NUVEC_H

#include "nuvec/status.h"
#include "nuvec/device.h"
#include "nuvec/memory.h"
#include "nuvec/buffer.h"
#include "nuvec/kernel.h"
#include "nuvec/command.h"
#include "nuvec/trace.h"
#include "nuvec/capture.h"
#include "nuvec/mapped.h"
#include "nuvec/safetensors.h"
#include "nuvec/gguf.h"
#include "nuvec/tensor.h"
#include "nuvec/ops.h"
#include "nuvec/graph.h"
#include "nuvec/quant.h"

#define NUVEC_VERSION_MAJOR 0
#define NUVEC_VERSION_MINOR 1
#define NUVEC_VERSION_PATCH 0
#define NUVEC_VERSION_STRING "0.1.0"

#endif
