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
install(FILES ops/systemd/folio.tmpfiles DESTINATION lib/tmpfiles.d RENAME folio.conf)
install(FILES ops/folio.conf DESTINATION /etc/folio)
# The database of the packaged service: role, database, schema (peer auth).
install(PROGRAMS ops/folio-setup-db DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(FILES ops/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ops/debian/lintian-overrides DESTINATION share/lintian/overrides RENAME folio)

# Debian wants its documentation gzipped (-n: no time stamp, so the package
# is reproducible): the changelog and the README.
set(FOLIO_DEB_DOC ${PROJECT_BINARY_DIR}/doc/deb)
add_custom_command(OUTPUT ${FOLIO_DEB_DOC}/changelog.gz ${FOLIO_DEB_DOC}/README.md.gz
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FOLIO_DEB_DOC}
  COMMAND sh -c "gzip -9n < \"$1\" > \"$2\"" gz ${PROJECT_SOURCE_DIR}/ops/debian/changelog ${FOLIO_DEB_DOC}/changelog.gz
  COMMAND sh -c "gzip -9n < \"$1\" > \"$2\"" gz ${PROJECT_SOURCE_DIR}/README.md ${FOLIO_DEB_DOC}/README.md.gz
  DEPENDS ${PROJECT_SOURCE_DIR}/ops/debian/changelog ${PROJECT_SOURCE_DIR}/README.md
  COMMENT "gzipped changelog and README for the package" VERBATIM)
add_custom_target(folio_deb_doc ALL DEPENDS ${FOLIO_DEB_DOC}/changelog.gz ${FOLIO_DEB_DOC}/README.md.gz)
install(FILES ${FOLIO_DEB_DOC}/changelog.gz ${FOLIO_DEB_DOC}/README.md.gz DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Manual pages: folio(1), folio-COMMAND(1) for every command and
# folio-setup-db(8), made by help2man from the --help texts (the option
# tables): one source of truth, like the command reference below.
# Without help2man (ops/deps.sh installs it) the build still works and the
# package has no manual pages, which test_deb and lintian then report.
find_program(FOLIO_HELP2MAN help2man)
if(FOLIO_HELP2MAN)
  set(FOLIO_MAN ${PROJECT_BINARY_DIR}/doc/man)
  add_custom_command(OUTPUT ${FOLIO_MAN}/folio.1.gz
    COMMAND bash ${PROJECT_SOURCE_DIR}/ops/gen-man.sh $<TARGET_FILE:folio> ${PROJECT_SOURCE_DIR}/ops/folio-setup-db
            ${FOLIO_MAN}
    DEPENDS folio ${PROJECT_SOURCE_DIR}/ops/gen-man.sh ${PROJECT_SOURCE_DIR}/ops/folio-setup-db
    COMMENT "help2man: folio --help of every command -> doc/man/*.gz")
  add_custom_target(folio_man ALL DEPENDS ${FOLIO_MAN}/folio.1.gz)
  install(DIRECTORY ${FOLIO_MAN}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 FILES_MATCHING PATTERN "*.1.gz")
  install(DIRECTORY ${FOLIO_MAN}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 FILES_MATCHING PATTERN "*.8.gz")
else()
  message(WARNING "help2man not found: the package gets no manual pages (bash ops/deps.sh installs it)")
endif()

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
set(FOLIO_PACKAGE_CONTACT "folio maintainers <folio@localhost>" CACHE STRING "Maintainer of the .deb")
set(CPACK_PACKAGE_CONTACT "${FOLIO_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "batch document classifier: PostgreSQL queue, Vulkan VLM, OCR fallback")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
# Debian ships stripped binaries (the build folder keeps the symbols).
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Beyond the shared libraries: OCR language data; what the maintainer
# scripts run (systemd-sysusers and systemd-tmpfiles, from systemd or their
# standalone packages; deb-systemd-invoke is essential); what folio-setup-db
# runs (psql; runuser is essential). A Vulkan driver and the server are
# only recommended: a worker runs OCR alone without a GPU, and the database
# may live on another host.
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "tesseract-ocr-eng, tesseract-ocr-osd, systemd | systemd-standalone-sysusers, systemd | systemd-standalone-tmpfiles, postgresql-client")
# qpdf: folio split and searchable copies of PDFs with text pages (issue 35).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "postgresql, mesa-vulkan-drivers | vulkan-icd, qpdf")
# CPack writes the summary as the synopsis and indents each line of this.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "folio takes scanned documents dropped into a folder, validates them, queues a
job per document in PostgreSQL, and classifies each one with a
vision-language model on its own Vulkan engine, falling back to Tesseract
OCR and keyword rules. Every result lands in SQL.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/ops/debian/conffiles
    ${PROJECT_SOURCE_DIR}/ops/debian/postinst
    ${PROJECT_SOURCE_DIR}/ops/debian/prerm
    ${PROJECT_SOURCE_DIR}/ops/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
