# cuda.m4: --with-cuda[=DIR]; default "check": use CUDA, cuBLAS and NCCL when
# found, error when asked for explicitly and missing.
AC_DEFUN([DT_CHECK_CUDA], [
AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
        [build the CUDA kernels and NCCL collectives (default: check /usr/local/cuda)])],
    [], [with_cuda=check])
dt_have_cuda=no
dt_have_cublas=no
dt_have_nccl=no
CUDA_DIR=""
AS_CASE([$with_cuda],
    [no], [],
    [yes|check], [CUDA_DIR=/usr/local/cuda],
    [CUDA_DIR=$with_cuda])
AS_IF([test "x$with_cuda" != xno], [
    AC_MSG_CHECKING([for CUDA in $CUDA_DIR])
    AS_IF([test -x "$CUDA_DIR/bin/nvcc" && test -f "$CUDA_DIR/include/cuda_runtime.h"],
          [dt_have_cuda=yes], [dt_have_cuda=no])
    AC_MSG_RESULT([$dt_have_cuda])
    AS_IF([test "x$dt_have_cuda" = xyes], [
        CUDA_LIBDIR=$CUDA_DIR/lib64
        AS_IF([test -d "$CUDA_LIBDIR"], [], [CUDA_LIBDIR=$CUDA_DIR/lib])
        AC_MSG_CHECKING([for cuBLAS])
        AS_IF([test -f "$CUDA_DIR/include/cublas_v2.h" && ls "$CUDA_LIBDIR"/libcublas.so* >/dev/null 2>&1],
              [dt_have_cublas=yes])
        AC_MSG_RESULT([$dt_have_cublas])
        AC_MSG_CHECKING([for NCCL])
        AS_IF([test -f "$CUDA_DIR/include/nccl.h" && ls "$CUDA_LIBDIR"/libnccl.so* >/dev/null 2>&1],
              [dt_have_nccl=yes])
        AC_MSG_RESULT([$dt_have_nccl])
    ])
    AS_IF([test "x$with_cuda" != xcheck && test "x$dt_have_cuda$dt_have_cublas$dt_have_nccl" != xyesyesyes],
          [AC_MSG_ERROR([--with-cuda=$with_cuda: CUDA toolkit with cuBLAS and NCCL not found in $CUDA_DIR (need bin/nvcc, include/cuda_runtime.h, cublas_v2.h, nccl.h and their libraries)])])
    AS_IF([test "x$dt_have_cuda$dt_have_cublas$dt_have_nccl" != xyesyesyes], [
        AS_IF([test "x$dt_have_cuda" = xyes], [AC_MSG_WARN([CUDA found without cuBLAS or NCCL: building CPU-only])])
        dt_have_cuda=no])
])
NVCC_ARCHS="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
AS_IF([test "x$dt_have_cuda" = xyes], [
    NVCC=$CUDA_DIR/bin/nvcc
    CUDA_CPPFLAGS="-I$CUDA_DIR/include"
    CUDA_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR -lcudart -lcublas -lnccl -lstdc++"
    AC_DEFINE([HAVE_CUDA], [1], [CUDA, cuBLAS and NCCL are available])
], [NVCC_ARCHS="(none)"])
AC_SUBST([NVCC])
AC_SUBST([NVCC_ARCHS])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([HAVE_CUDA], [test "x$dt_have_cuda" = xyes])
])
