// Clang thread-safety annotations (no-ops elsewhere), as leveldb's port/thread_annotations.h,
// in the spelling of clang's documentation (ThreadSafetyAnalysis.html). They say which mutex
// guards which member and which functions expect it held; a clang build with
// -Wthread-safety (the TIMEWARP_THREAD_SAFETY_ANALYSIS option, on in scripts/test's clang
// stage) checks every access against them. They only work on a mutex type that is itself
// annotated: tw::Mutex (common/mutex.hpp), never a bare std::mutex.
#pragma once

#if defined(__clang__)
#define TW_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TW_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (mutexes); `x` names the kind in messages.
#define CAPABILITY(x) TW_THREAD_ANNOTATION(capability(x))
// On a class: an RAII object that holds a capability for its lifetime (MutexLock).
#define SCOPED_CAPABILITY TW_THREAD_ANNOTATION(scoped_lockable)

// On a data member: read or written only with capability `x` held.
#define GUARDED_BY(x) TW_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: what it points to is read or written only with `x` held.
#define PT_GUARDED_BY(x) TW_THREAD_ANNOTATION(pt_guarded_by(x))

// On a function: it acquires / releases the capabilities (none named: `this`).
#define ACQUIRE(...) TW_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TW_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On a function: the caller must hold / must not hold the capabilities.
#define REQUIRES(...) TW_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) TW_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: the analysis may assume the capability is held after the call.
#define ASSERT_CAPABILITY(x) TW_THREAD_ANNOTATION(assert_capability(x))

// On a function: its body is not checked (say why beside it).
#define NO_THREAD_SAFETY_ANALYSIS TW_THREAD_ANNOTATION(no_thread_safety_analysis)
