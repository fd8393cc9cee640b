# Sanitizer builds (docs/SANITIZERS.md). Included by the top-level
# CMakeLists.txt before any target exists, so the flags reach every target.
#   -DSTAGGER_SANITIZE=address,undefined   ASan + UBSan (+ LeakSanitizer)
#   -DSTAGGER_SANITIZE=thread              TSan, plus the annotations below
# Empty (the default) is the normal build. Any error halts the program
# (-fno-sanitize-recover=all); the run-time options are set by scripts/test.
# Built with clang 14 (scripts/build --sanitize=... picks it): the compiler
# the fuzz targets use too.
set(STAGGER_SANITIZE "" CACHE STRING
    "Sanitizers for every target: '', 'address,undefined' or 'thread'")

# Called once after every layer is added: links the annotations into each
# executable of the project (an object library, so its definitions are always
# in the executable and win over the shared libraries').
function(stagger_sanitizers_finish)
  if(NOT TARGET stagger_tsan_annotations)
    return()
  endif()
  set(dirs ${CMAKE_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_link_libraries(${t} PRIVATE stagger_tsan_annotations)
      endif()
    endforeach()
  endwhile()
endfunction()

if(STAGGER_SANITIZE STREQUAL "")
  return()
elseif(NOT STAGGER_SANITIZE MATCHES "^(address,undefined|thread)$")
  message(FATAL_ERROR "STAGGER_SANITIZE='${STAGGER_SANITIZE}': expected "
          "'address,undefined' or 'thread'")
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "STAGGER_SANITIZE needs clang (scripts/build "
          "--sanitize=... configures clang++-14); got ${CMAKE_CXX_COMPILER_ID}")
endif()

set(stagger_sanitize_flags -fsanitize=${STAGGER_SANITIZE}
    -fno-sanitize-recover=all -fno-omit-frame-pointer)
add_compile_options(${stagger_sanitize_flags})
add_link_options(${stagger_sanitize_flags})

# TSan: Debian's Abseil and gRPC are not instrumented. The two annotation
# files re-define absl::Mutex's locking entry points (and CondVar's waits,
# Notification, BlockingCounter) and libgrpc's completion-queue hand-over
# points in every executable, so that every caller, libgrpc and Abseil
# included, goes through them; they call the real function and tell TSan
# what it synchronises (docs/SANITIZERS.md, "ThreadSanitizer and an
# uninstrumented Abseil and gRPC").
if(STAGGER_SANITIZE STREQUAL "thread")
  add_library(stagger_tsan_annotations OBJECT
              ${CMAKE_CURRENT_LIST_DIR}/absl_tsan_annotations.cc
              ${CMAKE_CURRENT_LIST_DIR}/grpc_tsan_annotations.cc)
  # gRPC's headers only: executables that do not use gRPC need not link it.
  target_include_directories(stagger_tsan_annotations PRIVATE
    $<TARGET_PROPERTY:gRPC::grpc,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(stagger_tsan_annotations PUBLIC absl::synchronization
                        absl::status ${CMAKE_DL_LIBS})
endif()
