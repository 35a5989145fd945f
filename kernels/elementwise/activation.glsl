// activation.glsl: the activation functions of the elementwise family (unary.comp, swiglu.comp),
// in F32. Each is written so that large arguments give the limit, not inf / inf.

// x / (1 + e^-x): for x far below 0, e^-x overflows to infinity and the quotient is -0.
float act_silu(float x) { return x / (1.0 + exp(-x)); }

// erfc(a) for a >= 0, by Abramowitz and Stegun 7.1.26 (|error| <= 1.5e-7 in exact arithmetic;
// about 2e-7 evaluated in F32): t = 1 / (1 + p a), erfc(a) = t (a1 + t (a2 + ...)) e^(-a^2).
float act_erfc_pos(float a)
{
    float t = 1.0 / (1.0 + 0.3275911 * a);
    float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return poly * exp(-a * a);
}

// erf(x): GLSL has none.
float act_erf(float x)
{
    float r = 1.0 - act_erfc_pos(abs(x));
    return x < 0.0 ? -r : r;
}

// x (1 + erf(x / sqrt 2)) / 2. Below 0, 1 + erf(z) is erfc(-z), computed as such (no cancellation).
float act_gelu(float x)
{
    float z = x * 0.70710678118654752;
    float c = act_erfc_pos(abs(z));
    return 0.5 * x * (z >= 0.0 ? 2.0 - c : c);
}

// x (1 + tanh(u)) / 2 with u = sqrt(2/pi) (x + 0.044715 x^3), computed as x / (1 + e^(-2u)) (the
// same function: (1 + tanh u) / 2 is the logistic of 2u), which stays finite where tanh's
// e^u / e^u would not.
float act_gelu_tanh(float x)
{
    float u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

// tanh(x), odd (-0 kept): below |x| 1/4 its Taylor series to x^13 (the next term is under 1e-10 of it);
// above, (1 - e^(-2|x|)) / (1 + e^(-2|x|)), whose e^(-2|x|) only shrinks (so +-inf gives +-1,
// never inf / inf as e^x / e^x would) and whose 1 - e^(-2|x|) keeps a relative error of a few ulps
// of 1 against a result >= 0.24 (about 1e-6 relative at most, with Vulkan's exp).
float act_tanh(float x)
{
    float a = abs(x);
    if (a < 0.25) {
        float z = x * x;
        return x * (1.0 + z * (-0.33333333333333333 + z * (0.13333333333333333 + z * (-0.053968253968253968 +
                    z * (0.021869488536155203 + z * (-0.0088632355299021966 + z * 0.0035921280365724810))))));
    }
    float e = exp(-2.0 * a);
    float r = (1.0 - e) / (1.0 + e);
    return x < 0.0 ? -r : r;
}
