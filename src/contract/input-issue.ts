/** One problem found in an input, with the path of the offending field (`tasks[2].prompt`). */
export interface InputIssue {
  path: string;
  message: string;
}
