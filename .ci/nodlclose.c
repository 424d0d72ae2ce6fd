/* Preloaded by .ci/run's sanitizer stage only. Open MPI dlclose()s its components at
 * MPI_Finalize; LeakSanitizer reports at process exit, when the memory those components
 * allocated can no longer be attributed to any module ("<unknown module>"), so no suppression
 * in .ci/lsan.supp could match it. Keeping every library mapped (dlclose does nothing) lets the
 * reports name Open MPI's modules. Nothing else changes: a library is never unloaded anyway
 * before a short-lived test process exits. */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
