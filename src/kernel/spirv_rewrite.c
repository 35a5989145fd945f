/* spirv_rewrite.c: rewrites of validated modules (spirv.h): a kernel's push constants as a storage
 * buffer, for graphs (nu__spirv_push_to_storage), and float16_t fragments as bfloat16 ones
 * (nu__spirv_f16_as_bf16, at the end).
 *
 * A graph launched many times cannot change push constants baked into a recorded command
 * buffer, but it can change memory: the kernel's push constant block becomes a storage buffer
 * (the same Block-decorated struct with the same offsets, which are std430 for both) at set 0,
 * one binding past the kernel's. What changes, with every id operand found by spvBinaryParse:
 * - the block variable's storage class and every pointer type to PushConstant: StorageBuffer;
 *   a pointer type that then duplicates an existing StorageBuffer pointer to the same type is
 *   dropped and its uses renamed to the existing one (its OpName too is dropped);
 * - two decorations (DescriptorSet 0, Binding `binding`) on the variable, before the first.
 * The result is validated like any module by whoever creates a kernel from it. */
#include "kernel/spirv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libspirv.h defines a const object at file scope (kDefaultMaxIdBound), which in C has external
 * linkage: a second translation unit including it must give its copy another name (spirv.c
 * includes it under its own). */
#define kDefaultMaxIdBound nu__spirv_rewrite_default_max_id_bound
#include <spirv-tools/libspirv.h>
#undef kDefaultMaxIdBound

#include "core/array.h"
#include "core/error.h"
#include "core/host.h"
#include "kernel/spirv_words.h"

typedef struct rw_inst {
    uint32_t at;         /* word offset of the instruction */
    uint16_t op, words;
    uint32_t result;     /* result id or 0 */
    uint32_t first;      /* the first operand word (OpName's target, a pointer's storage class) */
} rw_inst;

typedef struct rewrite {
    const uint32_t *base;
    rw_inst *inst;
    uint32_t inst_count, inst_capacity;
    uint32_t *uses;      /* word offsets of id operands that are uses (not results) */
    uint32_t use_count, use_capacity;
    bool oom;
} rewrite;

static spv_result_t rw_instruction(void *user, const spv_parsed_instruction_t *pi)
{
    rewrite *r = user;
    uint32_t at = (uint32_t)(pi->words - r->base);
    if (NU__GROW32(r->inst, r->inst_capacity, r->inst_count + 1, 256) != NU_OK ||
        NU__GROW32(r->uses, r->use_capacity, r->use_count + pi->num_operands, 1024) != NU_OK) {
        r->oom = true;
        return SPV_ERROR_OUT_OF_MEMORY;
    }
    r->inst[r->inst_count++] = (rw_inst){at, pi->opcode, pi->num_words, pi->result_id, pi->num_words > 1 ? at + 1 : 0};
    for (uint16_t i = 0; i < pi->num_operands; i++) {
        spv_operand_type_t t = pi->operands[i].type;
        if (t == SPV_OPERAND_TYPE_ID || t == SPV_OPERAND_TYPE_TYPE_ID || t == SPV_OPERAND_TYPE_MEMORY_SEMANTICS_ID ||
            t == SPV_OPERAND_TYPE_SCOPE_ID)
            r->uses[r->use_count++] = at + pi->operands[i].offset;
    }
    return SPV_SUCCESS;
}

/* Parses `words` into r (instructions and id uses); NU_ERROR_UNSUPPORTED where SPIRV-Tools cannot. */
static nu_status rw_parse(const uint32_t *words, size_t n, rewrite *r)
{
    *r = (rewrite){.base = words};
    spv_context ctx = spvContextCreate(SPV_ENV_UNIVERSAL_1_6);
    if (!ctx)
        return NU_ERROR_HOST_OUT_OF_MEMORY;
    spv_result_t res = spvBinaryParse(ctx, r, words, n, NULL, rw_instruction, NULL);
    spvContextDestroy(ctx);
    return r->oom ? NU_ERROR_HOST_OUT_OF_MEMORY : res != SPV_SUCCESS ? NU_ERROR_UNSUPPORTED : NU_OK;
}

nu_status nu__spirv_push_to_storage(const uint32_t *words, size_t n, uint32_t binding, uint32_t **out, size_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    if (n < SPV_HEADER_WORDS || words[0] != SPV_MAGIC || words[1] < 0x00010300u)
        return NU_ERROR_UNSUPPORTED; /* StorageBuffer needs SPIR-V 1.3 (or an extension) */
    rewrite r;
    nu_status st = rw_parse(words, n, &r);
    uint32_t *w = NULL, *rename = NULL;
    bool *drop = NULL;
    uint32_t bound = words[3], var = 0, vars = 0, first_dec = UINT32_MAX;
    if (st == NU_OK) {
        w = nu__malloc((n + 8) * sizeof *w);
        rename = nu__calloc(bound ? bound : 1, sizeof *rename);
        drop = nu__calloc(r.inst_count ? r.inst_count : 1, sizeof *drop);
        if (!w || !rename || !drop)
            st = NU_ERROR_HOST_OUT_OF_MEMORY;
    }
    if (st == NU_OK) {
        memcpy(w, words, n * sizeof *w);
        for (uint32_t i = 0; i < r.inst_count; i++) {
            const rw_inst *in = &r.inst[i];
            if ((in->op == OP_DECORATE || in->op == OP_MEMBER_DECORATE) && first_dec == UINT32_MAX)
                first_dec = i;
            if (in->op == OP_VARIABLE && in->words >= 4 && words[in->at + 3] == SC_PUSH_CONSTANT) {
                var = in->result;
                vars++;
                w[in->at + 3] = SC_STORAGE_BUFFER;
            }
        }
        if (vars != 1 || first_dec == UINT32_MAX)
            st = NU_ERROR_UNSUPPORTED;
    }
    /* Pointer types: PushConstant ones become StorageBuffer ones, or are renamed to an existing one. */
    for (uint32_t i = 0; st == NU_OK && i < r.inst_count; i++) {
        const rw_inst *p = &r.inst[i];
        if (p->op != OP_TYPE_POINTER || p->words != 4 || words[p->at + 2] != SC_PUSH_CONSTANT)
            continue;
        uint32_t pointee = words[p->at + 3], same = 0;
        for (uint32_t j = 0; j < r.inst_count && !same; j++) {
            const rw_inst *q = &r.inst[j];
            if (q->op == OP_TYPE_POINTER && q->words == 4 && words[q->at + 2] == SC_STORAGE_BUFFER &&
                words[q->at + 3] == pointee) {
                same = q->result;
                /* Its uses must come after the existing type's declaration. */
                for (uint32_t u = 0; u < r.use_count; u++)
                    if (words[r.uses[u]] == p->result && r.uses[u] < q->at)
                        st = NU_ERROR_UNSUPPORTED;
            }
        }
        if (same && p->result < bound) {
            rename[p->result] = same;
            drop[i] = true;
        } else {
            w[p->at + 2] = SC_STORAGE_BUFFER;
        }
    }
    if (st == NU_OK) {
        for (uint32_t u = 0; u < r.use_count; u++) {
            uint32_t id = w[r.uses[u]];
            if (id < bound && rename[id])
                w[r.uses[u]] = rename[id];
        }
        /* Names of dropped types go too (their target was renamed to a named type). */
        for (uint32_t i = 0; i < r.inst_count; i++) {
            const rw_inst *in = &r.inst[i];
            if ((in->op == OP_NAME || in->op == OP_MEMBER_NAME) && in->words >= 2 && words[in->at + 1] < bound &&
                rename[words[in->at + 1]])
                drop[i] = true;
        }
        /* Emit: the header, the instructions kept, the two decorations before the first. */
        uint32_t *o = nu__malloc((n + 8) * sizeof *o);
        if (!o) {
            st = NU_ERROR_HOST_OUT_OF_MEMORY;
        } else {
            size_t k = SPV_HEADER_WORDS;
            memcpy(o, w, SPV_HEADER_WORDS * sizeof *o);
            for (uint32_t i = 0; i < r.inst_count; i++) {
                const rw_inst *in = &r.inst[i];
                if (i == first_dec) {
                    uint32_t decs[8] = {4u << 16 | OP_DECORATE, var, DEC_DESCRIPTOR_SET, 0,
                                       4u << 16 | OP_DECORATE, var, DEC_BINDING,        binding};
                    memcpy(o + k, decs, sizeof decs);
                    k += 8;
                }
                if (drop[i])
                    continue;
                memcpy(o + k, w + in->at, in->words * sizeof *o);
                k += in->words;
            }
            *out = o;
            *out_n = k;
        }
    }
    nu__free(w);
    nu__free(rename);
    nu__free(drop);
    nu__free(r.inst);
    nu__free(r.uses);
    return st;
}

nu_status nu__spirv_f16_as_bf16(const uint32_t *words, size_t n, uint32_t **out, size_t *out_n, char *why,
                                size_t why_size)
{
    *out = NULL;
    *out_n = 0;
    if (n < SPV_HEADER_WORDS || words[0] != SPV_MAGIC) {
        snprintf(why, why_size, "not a SPIR-V module");
        return NU_ERROR_UNSUPPORTED;
    }
    rewrite r;
    nu_status st = rw_parse(words, n, &r);
    if (st != NU_OK)
        snprintf(why, why_size, "%s", st == NU_ERROR_UNSUPPORTED ? "SPIRV-Tools cannot parse it" : "out of host memory");
    /* The 16-bit float type (one), where the capabilities end, and Float16's OpCapability. */
    uint32_t half = 0, halves = 0, type_at = 0, last_cap = UINT32_MAX, float16_cap = UINT32_MAX;
    for (uint32_t i = 0; st == NU_OK && i < r.inst_count; i++) {
        const rw_inst *in = &r.inst[i];
        if (in->op == OP_TYPE_FLOAT && in->words >= 3 && words[in->at + 2] == 16) {
            halves++;
            half = in->result;
            type_at = in->at;
            if (in->words != 3) {
                snprintf(why, why_size, "its 16-bit float type already names an encoding");
                st = NU_ERROR_UNSUPPORTED;
            }
        }
        if (in->op == OP_CAPABILITY) {
            last_cap = i;
            if (in->words == 2 && words[in->at + 1] == CAP_FLOAT16)
                float16_cap = i;
        }
    }
    if (st == NU_OK && (halves != 1 || last_cap == UINT32_MAX)) {
        snprintf(why, why_size, "%u 16-bit float types (one wanted)%s", halves,
                 last_cap == UINT32_MAX ? ", no capabilities" : "");
        st = NU_ERROR_UNSUPPORTED;
    }
    /* Every use of the type: an OpTypeCooperativeMatrixKHR's component type (its third word). */
    for (uint32_t u = 0; st == NU_OK && u < r.use_count; u++) {
        if (words[r.uses[u]] != half)
            continue;
        bool component = false;
        for (uint32_t i = 0; i < r.inst_count && !component; i++)
            component = r.inst[i].op == OP_TYPE_COOPERATIVE_MATRIX_KHR && r.uses[u] == r.inst[i].at + 2;
        if (!component) {
            snprintf(why, why_size, "its 16-bit float type is used other than as a cooperative matrix's component type "
                                    "(word %u)", r.uses[u]);
            st = NU_ERROR_UNSUPPORTED;
        }
    }
    if (st == NU_OK) {
        /* OpExtension "SPV_KHR_bfloat16": 16 characters and a NUL, in 5 words. */
        static const char ext[20] = "SPV_KHR_bfloat16";
        uint32_t *o = nu__malloc((n + 16) * sizeof *o);
        if (!o) {
            snprintf(why, why_size, "out of host memory");
            st = NU_ERROR_HOST_OUT_OF_MEMORY;
        } else {
            size_t k = SPV_HEADER_WORDS;
            memcpy(o, words, SPV_HEADER_WORDS * sizeof *o);
            for (uint32_t i = 0; i < r.inst_count; i++) {
                const rw_inst *in = &r.inst[i];
                if (i == float16_cap) {
                    o[k++] = 2u << 16 | OP_CAPABILITY;
                    o[k++] = CAP_BFLOAT16_TYPE_KHR;
                } else if (in->at == type_at) {
                    o[k++] = 4u << 16 | OP_TYPE_FLOAT;
                    o[k++] = in->result;
                    o[k++] = 16;
                    o[k++] = FP_ENCODING_BFLOAT16_KHR;
                } else {
                    memcpy(o + k, words + in->at, in->words * sizeof *o);
                    k += in->words;
                }
                if (i == last_cap) {
                    if (float16_cap == UINT32_MAX) {
                        o[k++] = 2u << 16 | OP_CAPABILITY;
                        o[k++] = CAP_BFLOAT16_TYPE_KHR;
                    }
                    o[k++] = 2u << 16 | OP_CAPABILITY;
                    o[k++] = CAP_BFLOAT16_COOPERATIVE_MATRIX_KHR;
                    o[k++] = 6u << 16 | OP_EXTENSION;
                    memcpy(o + k, ext, sizeof ext);
                    k += sizeof ext / 4;
                }
            }
            *out = o;
            *out_n = k;
        }
    }
    nu__free(r.inst);
    nu__free(r.uses);
    return st;
}
