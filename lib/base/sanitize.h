/* SPDX-License-Identifier: BSD-3-Clause */
/* Which sanitizer this file is compiled under, for GCC (__SANITIZE_*__) and
 * clang (__has_feature) alike: SC_ASAN and SC_TSAN are 1 or 0. The library
 * poisons its spare blocks under ASan; tests that measure memory or count
 * the allocator's calls step aside under either, which own malloc. */
#ifndef SC_SANITIZE_H
#define SC_SANITIZE_H

#if defined(__SANITIZE_ADDRESS__)
#define SC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SC_ASAN 1
#endif
#endif
#ifndef SC_ASAN
#define SC_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define SC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SC_TSAN 1
#endif
#endif
#ifndef SC_TSAN
#define SC_TSAN 0
#endif

#endif
