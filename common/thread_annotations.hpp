// Clang thread-safety annotations (no-ops elsewhere), as leveldb's port/thread_annotations.h:
// they document which mutex guards which member and let clang check it.
#pragma once

#if defined(__clang__)
#define TW_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TW_THREAD_ANNOTATION(x)
#endif

#define GUARDED_BY(x) TW_THREAD_ANNOTATION(guarded_by(x))
#define REQUIRES(...) TW_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) TW_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
