// Shared by nuvec's kernels: the workgroup size every elementwise kernel uses.
#define NU_LOCAL_SIZE 256
