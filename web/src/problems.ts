// How a failure is told to the user: in plain words, beside the control that caused it.
import { ApiError } from './api.ts';

/** An error beside the control that caused it: empty text hides it. */
export function showError(box: HTMLElement, text: string): void {
  box.textContent = text;
  box.hidden = !text;
}

export function explain(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  return `Something went wrong: ${(e as Error)?.message ?? String(e)}`;
}
