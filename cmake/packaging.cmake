# Installation layout and the Debian package (`cpack -G DEB` in a build
# folder): the folio binary, systemd units, the sysusers entry for the
# `folio` account, the default configuration (a conffile) and the command
# reference generated from each command's --help.
include(GNUInstallDirs)
# Install copies what the build made; it never starts a build of its own
# (tests run cpack inside a finished build folder).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS folio RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# folio runs Tesseract in this helper, found next to the folio binary.
install(TARGETS folio-ocr RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# ... and parses and renders PDFs in this one (poppler, GPL-2.0+: the
# helper is the only binary that links it; LICENSE says what that means).
install(TARGETS folio-pdf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ops/systemd/folio-worker@.service ops/systemd/folio-ingest@.service
              ops/systemd/folio-migrate.service
        DESTINATION lib/systemd/system)
install(FILES ops/systemd/folio.sysusers DESTINATION lib/sysusers.d RENAME folio.conf)
install(FILES ops/folio.conf DESTINATION /etc/folio)
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The command reference: `folio COMMAND --help` for every command, so the
# installed text can never disagree with the binary.
set(FOLIO_HELP_TXT ${PROJECT_BINARY_DIR}/doc/folio-commands.txt)
add_custom_command(OUTPUT ${FOLIO_HELP_TXT}
  COMMAND bash ${PROJECT_SOURCE_DIR}/ops/gen-help.sh $<TARGET_FILE:folio> ${FOLIO_HELP_TXT}
  DEPENDS folio ${PROJECT_SOURCE_DIR}/ops/gen-help.sh
  COMMENT "folio --help of every command -> doc/folio-commands.txt")
add_custom_target(folio_help_doc ALL DEPENDS ${FOLIO_HELP_TXT})
install(FILES ${FOLIO_HELP_TXT} DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME folio)
set(CPACK_PACKAGE_VENDOR "folio")
set(CPACK_PACKAGE_CONTACT "folio maintainers <folio@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "batch document classification: ingest, PostgreSQL queue, Vulkan VLM workers, OCR fallback")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Beyond the shared libraries: OCR language data and a Vulkan driver.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "tesseract-ocr-eng, tesseract-ocr-osd")
# qpdf: folio split and searchable copies of PDFs with text pages (issue 35).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "postgresql, mesa-vulkan-drivers | vulkan-icd, qpdf")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/ops/debian/conffiles
    ${PROJECT_SOURCE_DIR}/ops/debian/postinst)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
