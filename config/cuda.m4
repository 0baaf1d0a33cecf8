# cuda.m4: --with-cuda[=DIR], --with-nccl=DIR; default "check": use CUDA,
# cuBLAS and NCCL when found, error when asked for explicitly and missing.
# NCCL is looked for in the CUDA directory, then in /usr (where NVIDIA's
# libnccl-dev packages put it), unless --with-nccl names its prefix.
# dt_cuda_summary / dt_nccl_summary say in configure's summary what was
# found and, when the build is CPU-only although CUDA is there, why.
AC_DEFUN([DT_CHECK_CUDA], [
AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
        [build the CUDA kernels and NCCL collectives (default: check /usr/local/cuda)])],
    [], [with_cuda=check])
AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl=DIR],
        [NCCL prefix (DIR/include/nccl.h, DIR/lib*/libnccl.so; default: the CUDA directory, then /usr)])],
    [], [with_nccl=check])
dt_have_cuda=no
dt_cuda_summary="no (--without-cuda)"
dt_nccl_summary="no"
NCCL_DIR=""
NCCL_INCDIR=""
NCCL_LIBDIR=""
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
        AS_IF([test "x$with_nccl" = xcheck || test "x$with_nccl" = xyes],
              [dt_nccl_dirs="$CUDA_DIR /usr"], [dt_nccl_dirs="$with_nccl"])
        for d in $dt_nccl_dirs; do
            test -f "$d/include/nccl.h" || continue
            for l in "$d/lib64" "$d/lib" "$d/lib/x86_64-linux-gnu" "$d/lib/aarch64-linux-gnu"; do
                AS_IF([ls "$l"/libnccl.so* >/dev/null 2>&1],
                      [dt_have_nccl=yes; NCCL_DIR=$d; NCCL_INCDIR=$d/include; NCCL_LIBDIR=$l; break])
            done
            test "x$dt_have_nccl" = xyes && break
        done
        AC_MSG_RESULT([$dt_have_nccl${NCCL_DIR:+ ($NCCL_DIR)}])
    ])
    dt_cuda_why=""
    AS_IF([test "x$dt_have_cuda" != xyes],
              [dt_cuda_why="no bin/nvcc and include/cuda_runtime.h in $CUDA_DIR"],
          [test "x$dt_have_cublas" != xyes],
              [dt_cuda_why="CUDA in $CUDA_DIR but no cuBLAS there"],
          [test "x$dt_have_nccl" != xyes],
              [dt_cuda_why="CUDA in $CUDA_DIR but no NCCL (include/nccl.h + libnccl.so) in $dt_nccl_dirs (--with-nccl=DIR)"
               dt_nccl_summary="no (looked in $dt_nccl_dirs)"])
    AS_IF([test -z "$dt_cuda_why"],
          [dt_cuda_summary="yes ($CUDA_DIR)"; dt_nccl_summary="yes ($NCCL_DIR)"],
          [test "x$dt_have_cuda" = xyes],
          [dt_cuda_summary="NO, CPU-only build: $dt_cuda_why"],
          [dt_cuda_summary="no ($dt_cuda_why)"])
    AS_IF([test "x$with_cuda" != xcheck && test -n "$dt_cuda_why"],
          [AC_MSG_ERROR([--with-cuda=$with_cuda: $dt_cuda_why])])
    AS_IF([test "x$dt_have_cuda$dt_have_cublas$dt_have_nccl" != xyesyesyes], [
        AS_IF([test "x$dt_have_cuda" = xyes], [AC_MSG_WARN([$dt_cuda_summary])])
        dt_have_cuda=no])
])
NVCC_ARCHS="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
AS_IF([test "x$dt_have_cuda" = xyes], [
    NVCC=$CUDA_DIR/bin/nvcc
    CUDA_CPPFLAGS="-I$CUDA_DIR/include"
    CUDA_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR"
    AS_IF([test "x$NCCL_INCDIR" != "x$CUDA_DIR/include"],
          [CUDA_CPPFLAGS="$CUDA_CPPFLAGS -I$NCCL_INCDIR"])
    AS_IF([test "x$NCCL_LIBDIR" != "x$CUDA_LIBDIR"],
          [CUDA_LIBS="$CUDA_LIBS -L$NCCL_LIBDIR -Wl,-rpath,$NCCL_LIBDIR"])
    CUDA_LIBS="$CUDA_LIBS -lcudart -lcublas -lnccl -lstdc++"
    AC_DEFINE([HAVE_CUDA], [1], [CUDA, cuBLAS and NCCL are available])
], [NVCC_ARCHS="(none)"])
AC_SUBST([NVCC])
AC_SUBST([NVCC_ARCHS])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([HAVE_CUDA], [test "x$dt_have_cuda" = xyes])
])
