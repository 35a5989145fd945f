/* matmul_tc.h: the cooperative-matrix (tensor-core) path of nu_op_matmul (src/ops/matmul.c). */
#ifndef NU_OPS_MATMUL_TC_H
#define NU_OPS_MATMUL_TC_H

#include "nuvec/command.h"
#include "nuvec/status.h"
#include "nuvec/tensor.h"

/* Records dst = a * b^T (+ bias) with cooperative matrices. Called by nu_op_matmul after its
 * checks (the operands are valid, dst is contiguous and non-empty, k > 0); returns
 * NU_ERROR_UNSUPPORTED, recording nothing and setting no error, where the device or the operands
 * do not suit the cooperative-matrix kernel (nu_op_matmul then takes the tiled path). */
nu_status nu__matmul_tensor_cores(nu_commands *c, const nu_tensor *dst, const nu_tensor *a, const nu_tensor *b,
                                  const nu_tensor *bias);

#endif
