# The rule that makes the Redis store's script and library: the Lua files
# of this folder, one per algorithm, concatenated in this order into C
# strings (embed.cmake).  Names must be defined before the files that use them,
# main.lua last.  Included by CMakeLists.txt and fuzz/CMakeLists.txt.
function(sl_add_redis_script out)
  set(lua prelude schedule token_bucket gcra fast leaky_bucket fixed_window
    sliding_window eventlog sliding_log stepped_window main)
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
