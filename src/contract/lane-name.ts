/** A lane's name: its window and its number in that window, sortable. Names its journal and segment in the spool. */
export function laneName(window: number, sequence: number): string {
  return `w${String(window).padStart(4, '0')}-l${String(sequence).padStart(7, '0')}`;
}
