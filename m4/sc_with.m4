# SPDX-License-Identifier: BSD-3-Clause
# SC_WITH(NAME, HELP-ARG, HELP, DETECT, ERROR, SUMMARY-LABEL, SUMMARY-TEXT)
#
# An optional package behind --with-NAME, by default "check": use it when
# DETECT finds it. DETECT runs unless --without-NAME (or --with-NAME=no) and
# sets have_NAME=yes when the package is usable; with_NAME holds what the user
# gave (yes, check or a value such as a directory). When the user asked for the
# package (anything but no and check) and DETECT did not find it, configure
# stops with ERROR rather than building without it.
#
# Defines the automake conditional HAVE_<NAME>, config.h's SC_HAVE_<NAME>, and
# appends "  SUMMARY-LABEL : $have_NAME SUMMARY-TEXT" to $sc_with_summary,
# the summary's lines for the optional packages in the order of the calls.
# HELP-ARG follows --with-NAME in --help (e.g. @<:@=DIR@:>@); SUMMARY-TEXT is
# expanded by the shell once DETECT has run.
AC_DEFUN([SC_WITH], [dnl
AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1$2], [$3 (default: check)])], [], [with_$1=check])
have_$1=no
AS_IF([test "x$with_$1" != xno], [
$4
  AS_IF([test "x$with_$1" != xcheck && test "x$have_$1" = xno], [AC_MSG_ERROR([$5])])
])
AM_CONDITIONAL([HAVE_]m4_toupper([$1]), [test "x$have_$1" = xyes])
AS_IF([test "x$have_$1" = xyes], [AC_DEFINE([SC_HAVE_]m4_toupper([$1]), [1], [$1 found])])
sc_with_summary="$sc_with_summary
  m4_format([%-18s], [$6]): $have_$1$7"
])
