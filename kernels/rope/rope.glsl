// rope/rope.glsl: the angle and rotation of rotary position embeddings, shared by rope.comp
// (nu_op_rope) and attention/kv_write.comp (nu_op_kv_write, nu_op_kv_append_rope), so that both
// turn a pair by the same F32 angle, bit for bit. Included with NU_ROPE_FF_BINDING defined: the
// binding of the frequency factors (F32; an empty range the kernel never reads without them).
//
// Pair i (0 <= i < rotary/2) at position p turns by a = p * exp2(-i * step), step = 2 log2(theta)
// / rotary (from the host, rounded once). The inverse frequency's exponent is split into an
// integer (exact, by ldexp) and a fraction in [-1/2, 1/2] whose exp2 is a polynomial fitted there
// (about 1 ulp, the same on every device, where Vulkan lets exp2 be off by 3 + 2|x| ulp). The
// angle is reduced modulo pi/2 (Cody-Waite: pi/2 in four parts, the first three of 8, 8 and 7
// significant bits, so their products with k are exact for |k| < 66313, angles to about 104000;
// at Llama 3.1's 131072 positions the second rounds by at most 2^-19 radians), and sin and cos come from
// polynomials fitted on [-pi/4, pi/4] (about 1 ulp), so no device's sin and cos are asked for
// large arguments, where Vulkan promises nothing.

// Scaling (nu_rope_desc's linear_factor, freq_factors, attn_factor): the caller passes p already
// multiplied by 1 / linear_factor (rounded once on the host; exact for powers of two), pair i's
// inverse frequency is divided by its factor, and cos and sin are multiplied by attn_factor (all
// three leave the unscaled angle's bits alone where they are 1 or absent).

layout(std430, binding = NU_ROPE_FF_BINDING) readonly buffer RopeFactors { float nu_rope_ff[]; };

// exp2(-i * step): pair i's inverse frequency.
float nu_rope_inv_freq(uint i, float step)
{
    float x = -float(i) * step;
    float n = round(x), f = x - n; // f in [-1/2, 1/2], exact
    float e2 = 1.0f + f * (0.6931471824645996f + f * (0.24022647738456726f + f * (0.05550329014658928f +
               f * (0.009618373587727547f + f * (0.0013399848248809576f + f * 0.00015370706387329847f)))));
    return ldexp(e2, int(n));
}

// c = cos a, s = sin a.
void nu_rope_sincos(float a, out float c, out float s)
{
    float k = round(a * 0.636619772f);
    float r = a - k * 1.5703125f;
    r = r - k * 4.825592041015625e-4f;
    r = r - k * 1.2665987014770508e-6f;
    r = r - k * 9.920936294705030e-10f;
    float z = r * r;
    float sn = r + r * z * (-0.16666655242443085f + z * (0.008332165889441967f + z * -0.00019515953317750245f));
    float cs = 1.0f - 0.5f * z + z * z * (0.04166664555668831f + z * (-0.0013887342065572739f + z * 2.4435852537862957e-05f));
    int q = int(k) & 3;
    s = q == 0 ? sn : (q == 1 ? cs : (q == 2 ? -sn : -cs));
    c = q == 0 ? cs : (q == 1 ? -sn : (q == 2 ? -cs : sn));
}

// c = m cos a, s = m sin a for a = p * exp2(-i * step) / ff, ff = nu_rope_ff[ff_at] where
// has_ff (a specialisation constant of the caller), else 1; m = mscale.
void nu_rope_rotation(float p, uint i, float step, bool has_ff, uint ff_at, float mscale, out float c, out float s)
{
    float inv = nu_rope_inv_freq(i, step);
    if (has_ff)
        inv = inv / nu_rope_ff[ff_at];
    nu_rope_sincos(p * inv, c, s);
    c *= mscale;
    s *= mscale;
}

