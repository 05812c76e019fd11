// Package conditions sets the kstatus conditions (Ready, Reconciling, Stalled) every kind reports, so a
// GitOps tool reads an object's health the same way whichever controller wrote it. It decides nothing.
package conditions
