# folio_embed(TARGET_C_FILE SYMBOL FILES...) generates a C file holding each
# input file as a byte array plus a table `const struct folio_blob_entry
# SYMBOL[]` (name = file name, NUL-terminated) and `SYMBOL_count`.
# Resources are embedded so an installed binary needs no source tree.
set(FOLIO_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed_run.cmake)

function(folio_embed out_c symbol)
  set(files ${ARGN})
  add_custom_command(
    OUTPUT ${out_c}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out_c} -DSYMBOL=${symbol} "-DFILES=${files}"
            -P ${FOLIO_EMBED_SCRIPT}
    DEPENDS ${files} ${FOLIO_EMBED_SCRIPT}
    COMMENT "Embedding ${symbol}"
    VERBATIM)
endfunction()
