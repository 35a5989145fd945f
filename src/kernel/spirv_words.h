/* spirv_words.h: the SPIR-V numbers (opcodes, storage classes, decorations, execution modes)
 * that spirv.c's reflection and spirv_rewrite.c's rewrite read and write, from the SPIR-V
 * specification. */
#ifndef NU_KERNEL_SPIRV_WORDS_H
#define NU_KERNEL_SPIRV_WORDS_H

enum {
    SPV_MAGIC = 0x07230203u,
    SPV_HEADER_WORDS = 5,
    OP_NAME = 5,
    OP_MEMBER_NAME = 6,
    OP_EXTENSION = 10,
    OP_ENTRY_POINT = 15,
    OP_EXECUTION_MODE = 16,
    OP_CAPABILITY = 17,
    OP_TYPE_BOOL = 20,
    OP_TYPE_INT = 21,
    OP_TYPE_FLOAT = 22,
    OP_TYPE_VECTOR = 23,
    OP_TYPE_MATRIX = 24,
    OP_TYPE_ARRAY = 28,
    OP_TYPE_RUNTIME_ARRAY = 29,
    OP_TYPE_STRUCT = 30,
    OP_TYPE_POINTER = 32,
    OP_CONSTANT = 43,
    OP_CONSTANT_COMPOSITE = 44,
    OP_SPEC_CONSTANT = 50,
    OP_SPEC_CONSTANT_COMPOSITE = 51,
    OP_VARIABLE = 59,
    OP_DECORATE = 71,
    OP_MEMBER_DECORATE = 72,
    OP_EXECUTION_MODE_ID = 331,
    OP_TYPE_COOPERATIVE_MATRIX_KHR = 4456,
    CAP_FLOAT16 = 9,
    CAP_BFLOAT16_TYPE_KHR = 5116,           /* SPV_KHR_bfloat16 */
    CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR = 5118,
    FP_ENCODING_BFLOAT16_KHR = 0,           /* OpTypeFloat's third operand */
    MODEL_GLCOMPUTE = 5,
    MODE_LOCAL_SIZE = 17,
    MODE_LOCAL_SIZE_ID = 38,
    DEC_SPEC_ID = 1,
    DEC_BLOCK = 2,
    DEC_BUFFER_BLOCK = 3,
    DEC_ROW_MAJOR = 4,
    DEC_ARRAY_STRIDE = 6,
    DEC_MATRIX_STRIDE = 7,
    DEC_BUILTIN = 11,
    DEC_BINDING = 33,
    DEC_DESCRIPTOR_SET = 34,
    DEC_OFFSET = 35,
    BUILTIN_WORKGROUP_SIZE = 25,
    SC_UNIFORM_CONSTANT = 0,
    SC_UNIFORM = 2,
    SC_PUSH_CONSTANT = 9,
    SC_STORAGE_BUFFER = 12,
};

#endif
