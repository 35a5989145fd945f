/* matmul_tc.c: the cooperative-matrix path of nu_op_matmul (see matmul_tc.h). Not written yet:
 * every product takes the tiled path. */
#include "ops/matmul_tc.h"

nu_status nu__matmul_tensor_cores(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                                  const nu_tensor *bias)
{
    (void)c;
    (void)dst;
    (void)a;
    (void)b;
    (void)bias;
    return NU_ERROR_UNSUPPORTED;
}
