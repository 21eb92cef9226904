# The rules that embed Lua in C at build time (embed.cmake).  Included by
# CMakeLists.txt and fuzz/CMakeLists.txt.

# The Redis store's script and library: the Lua files of this folder, one
# per algorithm, concatenated in this order.  Names must be defined before
# the files that use them, main.lua last.
function(sl_add_redis_script out)
  set(lua prelude schedule token_bucket gcra fast leaky_bucket fixed_window
    lease_bucket lease sliding_window eventlog sliding_log stepped_window main)
  list(TRANSFORM lua PREPEND ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/)
  list(TRANSFORM lua APPEND .lua)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} "-DSOURCES=${lua}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed.cmake
    DEPENDS ${lua} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed.cmake
    COMMENT "embedding the Redis store's Lua scripts"
    VERBATIM)
endfunction()

# Scripts that run on their own (EVAL), each a C string:
#   sl_embed_lua(out.c dir/header.h c_name file.lua [c_name file.lua ...])
# writes out.c, which includes header.h (it declares the strings) and
# defines each c_name as its file's text; each file is a path from the
# calling CMakeLists.txt's folder.
function(sl_embed_lua out header)
  set(names "")
  set(files "")
  while(ARGN)
    list(POP_FRONT ARGN name file)
    list(APPEND names ${name})
    list(APPEND files ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  endwhile()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DHEADER=${header}
            "-DNAMES=${names}" "-DSOURCES=${files}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed.cmake
    DEPENDS ${files} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed.cmake
    COMMENT "embedding Lua scripts in ${out}"
    VERBATIM)
endfunction()
