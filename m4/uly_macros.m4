# SPDX-License-Identifier: Apache-2.0
# uly_macros.m4 -- small helpers for configure.ac.

# ULY_SAVE_FLAGS / ULY_RESTORE_FLAGS: bracket a probe that needs extra CFLAGS/LIBS.
AC_DEFUN([ULY_SAVE_FLAGS], [
  uly_save_CFLAGS="$CFLAGS"
  uly_save_LIBS="$LIBS"
])
AC_DEFUN([ULY_RESTORE_FLAGS], [
  CFLAGS="$uly_save_CFLAGS"
  LIBS="$uly_save_LIBS"
])

# ULY_CHECK_C11: make sure the compiler accepts -std=c11 and use it.
AC_DEFUN([ULY_CHECK_C11], [
  AC_CACHE_CHECK([whether $CC accepts -std=c11], [uly_cv_c11], [
    uly_save_c11="$CFLAGS"
    CFLAGS="$CFLAGS -std=c11"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[_Static_assert(1, "c11");]], [[]])],
      [uly_cv_c11=yes], [uly_cv_c11=no])
    CFLAGS="$uly_save_c11"])
  AS_IF([test "x$uly_cv_c11" = xyes], [CFLAGS="$CFLAGS -std=c11"],
    [AC_MSG_ERROR([a C11 compiler is required (On Debian: apt-get install gcc)])])
])
