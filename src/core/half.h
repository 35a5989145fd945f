/* half.h: IEEE half (F16) and bfloat16 (BF16) conversions on the CPU (half.c), the ones every
 * CPU codec and writer in nuvec uses, so that they round alike.
 *
 * To F32 both are exact. NaN halves become quiet NaNs with their payload (what ggml's converter
 * and x86's F16C give), NaN bfloat16 keep their bits. From F32 both round to nearest even;
 * values beyond F16's range become infinities, NaNs stay NaNs (quiet). */
#ifndef NU_CORE_HALF_H
#define NU_CORE_HALF_H

#include <stdint.h>

float nu__f16_to_f32(uint16_t h);
uint16_t nu__f32_to_f16(float x);
float nu__bf16_to_f32(uint16_t h);
uint16_t nu__f32_to_bf16(float x);

#endif
