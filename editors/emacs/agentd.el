;;; agentd.el --- Client for the agentd coding-agent daemon -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The agentd authors

;; Author: The agentd authors
;; Maintainer: The agentd authors
;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: tools, processes
;; URL: https://github.com/agentd/agentd
;; SPDX-License-Identifier: MIT OR Apache-2.0

;; This file is not part of GNU Emacs.

;; Licensed under either of the Apache License, Version 2.0 or the MIT
;; license, at your option.  See LICENSE-APACHE and LICENSE-MIT in the
;; agentd repository.

;;; Commentary:

;; agentd is a per-user daemon hosting coding-agent sessions (an LLM
;; plus tools) behind JSON-RPC 2.0 on a Unix socket.  This package is a
;; thin client of that socket: every decision stays in the daemon, and
;; Emacs only sends commands, renders the event stream and binds keys.
;;
;; Start with `agentd-new' (a session in the current project), then
;; `agentd-submit'.  The transcript buffer (`agentd-transcript-mode')
;; streams the session's events: your input, the assistant's text as it
;; arrives, reasoning (folded), tool calls with their arguments, status
;; and output (folded when long), warnings, errors and token usage.
;; Edits the agent makes open as a diff.  `agentd-sessions' lists every
;; session the daemon holds, including ones started by `agentctl'.
;;
;; Bind the command map to a prefix of your choice, for example:
;;
;;   (keymap-global-set "C-c a" agentd-command-map)      ; Emacs 29
;;   (global-set-key (kbd "C-c a") agentd-command-map)   ; Emacs 28
;;
;; The client speaks JSON-RPC through Emacs' own `jsonrpc.el'.  It asks
;; `agentctl socket-path' where the daemon listens (`agentd-socket'
;; overrides the place, and agentctl still checks it): agentctl answers
;; only once the runtime directory is yours and the process serving the
;; socket runs as you, and starts the daemon when nothing answers (see
;; `agentd-autostart').  When it refuses, its reason is the error you
;; see.  After a daemon restart the client reconnects by itself and
;; resumes every transcript from the last event it showed, so nothing
;; is lost or shown twice.

;;; Code:

(require 'cl-lib)
(require 'diff)
(require 'diff-mode)
(require 'eieio)
(require 'jsonrpc)
(require 'project)
(require 'seq)
(require 'subr-x)
(require 'tabulated-list)

;;;; Customization

(defgroup agentd nil
  "Client for the agentd coding-agent daemon."
  :group 'tools
  :prefix "agentd-"
  :link '(url-link :tag "Home" "https://github.com/agentd/agentd"))

(defcustom agentd-socket nil
  "The daemon's socket, or nil for the one `agentctl socket-path' names.
agentctl's rule is $AGENTD_SOCKET, else $XDG_RUNTIME_DIR/agentd/agentd.sock,
else $TMPDIR/agentd-UID/agentd.sock.  A socket set here is passed to
agentctl, which makes the same checks of it."
  :type '(choice (const :tag "agentctl's choice" nil) file))

(defcustom agentd-agentctl-program "agentctl"
  "The `agentctl' program, which finds the socket and starts the daemon."
  :type 'string)

(defcustom agentd-autostart t
  "Whether `agentctl' may start the daemon when none answers.
`agentctl' itself refuses when AGENTD_NO_AUTOSTART=1."
  :type 'boolean)

(defcustom agentd-provider nil
  "Provider of new sessions, or nil for the daemon's default."
  :type '(choice (const :tag "The daemon's default" nil) string))

(defcustom agentd-model nil
  "Model of new sessions, or nil for the provider's default."
  :type '(choice (const :tag "The provider's default" nil) string))

(defcustom agentd-approval-mode nil
  "Whether new sessions ask before calls that write files or run commands.
nil keeps the daemon's configured default; \"ask\" makes each such call
wait for `agentd-respond'; \"auto\" runs them without asking."
  :type '(choice (const :tag "The daemon's default" nil)
                 (const :tag "Ask first" "ask")
                 (const :tag "Run without asking" "auto")))

(defcustom agentd-request-timeout 30
  "Seconds to wait for the daemon to answer a command."
  :type 'number)

(defcustom agentd-tool-output-max-lines 12
  "Tool output longer than this many lines is folded (TAB unfolds it)."
  :type 'natnum)

(defcustom agentd-tool-args-max-chars 300
  "Tool arguments longer than this are cut in the call's header line."
  :type 'natnum)

(defcustom agentd-show-edits t
  "Whether edits by the agent pop up their diff as they happen.
The diffs are collected in the session's diff buffer either way
\(\\[agentd-show-diff])."
  :type 'boolean)

(defcustom agentd-context-max-chars 200000
  "Most characters of a file or region put into a prompt.
This bounds `agentd-send-file' and `agentd-send-region'."
  :type 'natnum)

(defcustom agentd-reconnect-max-delay 5
  "Longest pause, in seconds, between attempts to reconnect."
  :type 'number)

(defface agentd-user '((t :inherit font-lock-keyword-face :weight bold))
  "Face of the user's input in a transcript.")

(defface agentd-reasoning '((t :inherit shadow :slant italic))
  "Face of the model's reasoning.")

(defface agentd-tool '((t :inherit font-lock-function-name-face))
  "Face of a tool call's header.")

(defface agentd-tool-args '((t :inherit font-lock-string-face))
  "Face of a tool call's arguments.")

(defface agentd-tool-output '((t :inherit shadow))
  "Face of a tool call's output.")

(defface agentd-ok '((t :inherit success))
  "Face of a finished tool call's status.")

(defface agentd-running '((t :inherit warning))
  "Face of a running tool call's status.")

(defface agentd-warning '((t :inherit warning))
  "Face of warnings.")

(defface agentd-error '((t :inherit error))
  "Face of errors.")

(defface agentd-request '((t :inherit warning :weight bold))
  "Face of a request waiting for your answer.")

(defface agentd-dim '((t :inherit shadow))
  "Face of usage figures and other notes.")

;;;; Errors

(define-error 'agentd-error "agentd" 'user-error)

(defun agentd--fail (format-string &rest args)
  "Signal an `agentd-error' with a message from FORMAT-STRING and ARGS."
  (signal 'agentd-error (list (apply #'format-message format-string args))))

;;;; The connection: jsonrpc.el over the Unix socket

;; The daemon detects the framing from a connection's first byte, so
;; jsonrpc.el's `Content-Length' messages need nothing of it.  The
;; connection is a `jsonrpc-process-connection' over the socket's
;; network process; its dispatcher hands notifications to the views.

(defclass agentd-connection (jsonrpc-process-connection)
  ((network :initarg :network :reader agentd--conn-process
            :documentation "The socket's network process (jsonrpc's `:process').")
   (socket :initarg :socket :reader agentd--conn-socket
           :documentation "The socket's path.")
   (subs :initform (make-hash-table :test #'equal) :reader agentd--conn-subs
         :documentation "Views by subscription id.")
   (daemon-sub :initform nil :accessor agentd--conn-daemon-sub
               :documentation "The daemon-wide subscription, for the session list."))
  :documentation "A JSON-RPC connection to the daemon.")

(cl-defstruct (agentd--view (:constructor agentd--view-make) (:copier nil))
  "What Emacs shows of one session."
  id buffer sub
  (last-seq 0)
  (replayed 0)
  state title cwd parent queue usage
  (tools (make-hash-table :test #'equal))
  reasoning text-open pending)

(defvar agentd--conn nil
  "The live connection, or nil.")

(defvar agentd--reconnect-timer nil
  "The timer of the next reconnection attempt, or nil.")

(defvar agentd--reconnect-delay 0.2
  "Pause before the next reconnection attempt, in seconds.")

(defvar agentd--views (make-hash-table :test #'equal)
  "Views of sessions, by session id.")

(defvar agentd--in-handler nil
  "Non-nil while a message from the daemon is being handled.
A call waiting for its answer there would wait behind that message.")

(defconst agentd--sessions-buffer "*agentd sessions*"
  "Name of the session list buffer.")

(defvar agentd--max-message-chars (* 64 1024 1024)
  "Longest message accepted from the daemon; the daemon caps its own.")

(defun agentd--from-json (value)
  "Return VALUE, read by `jsonrpc', with objects as alists, arrays as lists.
`jsonrpc' reads objects as plists, arrays as vectors and false as
`:json-false'; the rest of this package reads alists, lists and nil."
  (cond
   ((eq value :json-false) nil)
   ((vectorp value) (mapcar #'agentd--from-json value))
   ((and (consp value) (keywordp (car value)))
    (let (alist)
      (while value
        (push (cons (intern (substring (symbol-name (car value)) 1))
                    (agentd--from-json (cadr value)))
              alist)
        (setq value (cddr value)))
      (nreverse alist)))
   (t value)))

(defun agentd--socket-path (&optional no-autostart)
  "Return the daemon's socket: what `agentctl socket-path' prints.
That is `agentd-socket' when set, else agentctl's own rule
\($AGENTD_SOCKET, then the runtime directory).  agentctl answers only
once the process serving the socket runs as you and the runtime
directory is yours, and starts the daemon when nothing answers (unless
NO-AUTOSTART, or `agentd-autostart' is off).  Return nil when no daemon
answers and none may be started; signal `agentd-error' with agentctl's
words when it refuses."
  (let ((program (executable-find agentd-agentctl-program))
        (no-autostart (or no-autostart (not agentd-autostart)))
        (stderr (make-temp-file "agentd-socket-path")))
    (unless program
      (agentd--fail "`%s' is not on `exec-path'; agentd.el asks it where the daemon listens"
                    agentd-agentctl-program))
    (unwind-protect
        (with-temp-buffer
          (let* ((process-environment (if no-autostart
                                          (cons "AGENTD_NO_AUTOSTART=1" process-environment)
                                        process-environment))
                 (status (apply #'call-process program nil (list t stderr) nil
                                (append (and agentd-socket
                                             (list "--socket" (expand-file-name agentd-socket)))
                                        '("--json" "socket-path"))))
                 (failure (and (not (eql status 0))
                               (agentd--agentctl-error stderr status))))
            (cond
             ((not failure)
              (goto-char (point-min))
              (alist-get 'socket (json-parse-buffer :object-type 'alist)))
             ;; Nothing answers and nothing may start: the caller decides.
             ((and no-autostart (equal (alist-get 'kind failure) "unavailable")) nil)
             (t (agentd--fail "%s" (alist-get 'message failure))))))
      (delete-file stderr))))

(defun agentd--agentctl-error (file status)
  "The error agentctl wrote to FILE with `--json' when it exited with STATUS.
An alist with `kind' and `message'."
  (let ((text (with-temp-buffer
                (insert-file-contents file)
                (string-trim (buffer-string)))))
    (or (ignore-errors
          (let ((err (json-parse-string text :object-type 'alist :null-object nil)))
            (and (alist-get 'message err) err)))
        `((kind . "failed")
          (message . ,(format "`%s socket-path' exited with %s: %s"
                              agentd-agentctl-program status text))))))

(defun agentd--open (path)
  "Connect to the daemon at PATH; return the connection, or nil if none answers."
  (condition-case nil
      (let ((proc (make-network-process
                   :name "agentd" :family 'local :service path
                   :coding 'utf-8-unix :noquery t)))
        (prog1 (agentd-connection
                :name "agentd" :process proc :network proc :socket path
                ;; Streamed deltas are many: no log of every message.
                :events-buffer-scrollback-size 0
                :notification-dispatcher #'agentd--dispatch
                :request-dispatcher #'agentd--no-requests
                :on-shutdown #'agentd--on-shutdown)
          (add-function :around (process-filter proc) #'agentd--bounded-filter)))
    (file-error nil)))

(defun agentd--bounded-filter (filter proc string)
  "Pass STRING, read from PROC, to FILTER unless a message grows too long.
A message longer than `agentd--max-message-chars' ends the connection
\(and the reconnection starts afresh) instead of growing without end."
  (if (> (+ (length string) (buffer-size (process-buffer proc))) agentd--max-message-chars)
      (progn
        (message "agentd: a message from the daemon exceeded %d characters; reconnecting"
                 agentd--max-message-chars)
        (delete-process proc))
    (funcall filter proc string)))

(defun agentd--no-requests (_conn method _params)
  "Refuse the daemon's request METHOD: this client serves none."
  (jsonrpc-error :code -32601 :message (format "agentd.el serves no %s" method)))

(defun agentd--connection (&optional no-autostart)
  "The live connection, connecting (and starting the daemon) if needed.
With NO-AUTOSTART, return nil instead of starting a daemon."
  (when (and agentd--conn (not agentd--in-handler))
    ;; Notice a connection the daemon has closed (a restart) before using it.
    (accept-process-output (agentd--conn-process agentd--conn) 0 nil t))
  (if (and agentd--conn (jsonrpc-running-p agentd--conn))
      agentd--conn
    (let* ((path (agentd--socket-path no-autostart))
           (conn (and path (agentd--open path))))
      (cond
       (conn (agentd--connected conn))
       (no-autostart nil)
       (t (agentd--fail "No daemon answers at %s" path))))))

(defun agentd--connected (conn)
  "Make CONN the live connection and resume every view on it; return CONN."
  (setq agentd--conn conn
        agentd--reconnect-delay 0.2)
  (when (timerp agentd--reconnect-timer)
    (cancel-timer agentd--reconnect-timer)
    (setq agentd--reconnect-timer nil))
  (maphash (lambda (_id view)
             (if (buffer-live-p (agentd--view-buffer view))
                 (unless (eq (agentd--view-state view) 'closed)
                   (agentd--subscribe view))
               (remhash (agentd--view-id view) agentd--views)))
           agentd--views)
  (when (get-buffer agentd--sessions-buffer)
    (agentd--watch-daemon conn))
  conn)

(defun agentd--dispatch (conn method params)
  "Handle the notification METHOD (a symbol) with PARAMS, read on CONN.
A failure is reported, and the messages after it are still handled."
  (let ((agentd--in-handler t))
    (condition-case err
        (agentd--notify conn (symbol-name method) (agentd--from-json params))
      (error (message "agentd: %s" (error-message-string err))))))

(defun agentd--notify (conn method params)
  "Handle the notification METHOD with PARAMS on CONN."
  (let ((sub (alist-get 'subscription params))
        (item (alist-get 'result params)))
    (pcase method
      ("session/event"
       ;; The daemon answers a subscribe before it sends the subscription's
       ;; first item, so an unknown subscription is one this client ended.
       (let ((view (gethash sub (agentd--conn-subs conn))))
         (when view
           (agentd--on-item view item))))
      ("daemon/event" (agentd--sessions-changed)))))

(defun agentd--on-shutdown (conn)
  "Handle the end of CONN, whose waiting requests `jsonrpc' has failed.
Reconnect if it was the live connection and a transcript needs it."
  (maphash (lambda (_sub view) (setf (agentd--view-sub view) nil))
           (agentd--conn-subs conn))
  (clrhash (agentd--conn-subs conn))
  (when (eq conn agentd--conn)
    (setq agentd--conn nil)
    (let ((live (agentd--live-views)))
      (dolist (view live) (agentd--refresh-status view))
      (when live
        (message "agentd: connection lost; reconnecting")
        (agentd--schedule-reconnect)))))

(defun agentd--live-views ()
  "Views whose transcript is open and whose session is not closed."
  (seq-filter (lambda (view) (and (buffer-live-p (agentd--view-buffer view))
                                  (not (eq (agentd--view-state view) 'closed))))
              (hash-table-values agentd--views)))

(defun agentd--schedule-reconnect ()
  "Try to reconnect soon, backing off while nothing answers."
  (unless (timerp agentd--reconnect-timer)
    (setq agentd--reconnect-timer
          (run-at-time agentd--reconnect-delay nil #'agentd--reconnect))))

(defun agentd--reconnect ()
  "Reconnect if a live view still needs the daemon; else stop trying."
  (setq agentd--reconnect-timer nil)
  (when (agentd--live-views)
    (if (condition-case err
            (agentd--connection t)
          (agentd-error (message "agentd: %s" (error-message-string err)) nil))
        (message "agentd: reconnected")
      (setq agentd--reconnect-delay
            (min agentd-reconnect-max-delay (* 2 agentd--reconnect-delay)))
      (agentd--schedule-reconnect))))

(defun agentd--send (conn method params &optional callback)
  "Send METHOD with PARAMS (a plist) on CONN; CALLBACK gets the response.
The response is an alist with `result' or `error' (a lost connection
is an error too).  Signal `agentd-error' if the connection is closed."
  ;; A write to a closed socket would raise SIGPIPE, which ends Emacs in batch mode.
  (unless (jsonrpc-running-p conn)
    (agentd--fail "The connection to agentd closed; try again"))
  (let ((respond (lambda (key value)
                   (when callback
                     (let ((agentd--in-handler t))
                       (funcall callback (list (cons key (agentd--from-json value)))))))))
    (jsonrpc-async-request
     conn (intern method) (or params (make-hash-table))
     :success-fn (lambda (result) (funcall respond 'result result))
     :error-fn (lambda (err)
                 (funcall respond 'error
                          (if (jsonrpc-running-p conn)
                              err
                            '(:message "the connection to agentd closed"))))
     :timeout nil)))

(defun agentd--error-text (err)
  "The message of the JSON-RPC error object ERR."
  (let ((text (or (alist-get 'message err) "unknown error"))
        (kind (alist-get 'kind (alist-get 'data err))))
    (if kind (format "%s (%s)" text kind) text)))

(defun agentd--response (method &optional params)
  "Send METHOD with PARAMS (a plist) and return the daemon's response.
Signal `agentd-error' when no answer comes in time.  This waits by
polling rather than with `jsonrpc-request', whose answer leaves the
process filter by a throw, so the messages read with it would wait for
the next output."
  (when agentd--in-handler
    (error "Cannot wait for %s inside a handler of agentd messages" method))
  (let* ((conn (agentd--connection))
         (proc (agentd--conn-process conn))
         (deadline (+ (float-time) agentd-request-timeout))
         response)
    (agentd--send conn method params (lambda (msg) (setq response msg)))
    (while (and (not response) (< (float-time) deadline))
      (accept-process-output proc 0.05 nil t))
    (or response
        (agentd--fail "agentd did not answer %s within %s s" method agentd-request-timeout))))

(defun agentd--result (method response)
  "The result of METHOD's RESPONSE; signal `agentd-error' if it is an error."
  (if (alist-get 'error response)
      (agentd--fail "%s: %s" method (agentd--error-text (alist-get 'error response)))
    (alist-get 'result response)))

(defun agentd--call (method &optional params)
  "Call METHOD with PARAMS (a plist) and return its result.
Signal `agentd-error' with the daemon's message when it fails."
  (agentd--result method (agentd--response method params)))

;;;; Sessions and their views

(defvar agentd--last-session nil
  "The session the last command acted on.")

(defvar-local agentd--view nil
  "The view a transcript buffer shows.")

(defun agentd--short (id)
  "The first eight characters of the session id ID."
  (if (and id (> (length id) 8)) (substring id 0 8) (or id "")))

(defun agentd--state (name)
  "The state symbol of the wire state NAME."
  (and name (intern name)))

(defun agentd--state-label (state)
  "Return the label of STATE for a status line."
  (pcase state
    ('idle "idle")
    ('processing "working")
    ('awaiting_input "awaiting input")
    ('closed "closed")
    (_ "unknown")))

(defun agentd--view-status (view)
  "VIEW's status: its state, or that it is disconnected."
  (if (and (null (agentd--view-sub view))
           (not (eq (agentd--view-state view) 'closed)))
      "disconnected"
    (agentd--state-label (agentd--view-state view))))

(defun agentd--view-for (snapshot)
  "The view of the session in SNAPSHOT, made (with its buffer) if needed."
  (let* ((id (alist-get 'session_id snapshot))
         (view (gethash id agentd--views)))
    (unless (and view (buffer-live-p (agentd--view-buffer view)))
      (setq view (agentd--view-make :id id))
      (puthash id view agentd--views)
      (let ((buffer (generate-new-buffer
                     (format "*agentd: %s%s*"
                             (let ((title (alist-get 'title snapshot)))
                               (if title (concat title " ") ""))
                             (agentd--short id)))))
        (setf (agentd--view-buffer view) buffer)
        (with-current-buffer buffer
          (agentd-transcript-mode)
          (setq agentd--view view)
          (add-hook 'kill-buffer-hook #'agentd--view-killed nil t))))
    (setf (agentd--view-title view) (alist-get 'title snapshot)
          (agentd--view-cwd view) (alist-get 'cwd snapshot)
          (agentd--view-parent view) (alist-get 'parent_id snapshot)
          (agentd--view-queue view) (alist-get 'queue snapshot)
          (agentd--view-usage view) (alist-get 'usage snapshot)
          (agentd--view-replayed view) (or (alist-get 'last_seq snapshot) 0))
    (unless (agentd--view-sub view)
      (setf (agentd--view-state view) (agentd--state (alist-get 'state snapshot))))
    view))

(defun agentd--view-killed ()
  "Forget the view of the transcript being killed, ending its subscription."
  (when-let ((view agentd--view))
    (remhash (agentd--view-id view) agentd--views)
    (when-let ((sub (agentd--view-sub view))
               (conn agentd--conn)
               ((stringp sub)))
      (remhash sub (agentd--conn-subs conn))
      (when (process-live-p (agentd--conn-process conn))
        (ignore-error agentd-error
          (agentd--send conn "session/unsubscribe" (list :subscription sub)))))))

(defun agentd--subscribe (view)
  "Subscribe VIEW to its session's events after the last one it showed."
  (let ((conn (agentd--connection t)))
    (when (and conn (not (agentd--view-sub view)))
      ;; Marked at once, so a second call before the answer does not subscribe twice.
      (setf (agentd--view-sub view) 'pending)
      (condition-case err
          (agentd--subscribe-on conn view)
        (agentd-error
         (setf (agentd--view-sub view) nil)
         (message "agentd: %s" (error-message-string err)))))))

(defun agentd--subscribe-on (conn view)
  "Send VIEW's subscription on CONN and route the events that answer it."
  (agentd--send
   conn "session/subscribe"
   (list :session_id (agentd--view-id view) :since_seq (agentd--view-last-seq view))
   (lambda (msg)
     (let ((sub (alist-get 'result msg)))
       (if (not sub)
           (progn
             (setf (agentd--view-sub view) nil)
             ;; A closed connection is retried by the reconnection.
             (when (jsonrpc-running-p conn)
               (agentd--note view 'agentd-error "could not follow the session: %s"
                             (agentd--error-text (alist-get 'error msg)))))
         (setf (agentd--view-sub view) sub)
         (puthash sub view (agentd--conn-subs conn)))
       (agentd--refresh-status view)))))

(defun agentd--on-item (view item)
  "Show the stream ITEM of VIEW's subscription: an event, or the end."
  (if (equal (alist-get 'type item) "end")
      (agentd--on-end view item)
    (let ((seq (alist-get 'seq item)))
      ;; Resubscribing with since_seq replays nothing already shown; the
      ;; check keeps that true whatever the daemon sends.
      (when (and (integerp seq) (> seq (agentd--view-last-seq view)))
        (setf (agentd--view-last-seq view) seq)
        (when (buffer-live-p (agentd--view-buffer view))
          (agentd--render view (alist-get 'kind item) (alist-get 'data item)
                          (> seq (agentd--view-replayed view))))))))

(defun agentd--on-end (view item)
  "Handle the end ITEM of VIEW's subscription."
  (let ((sub (agentd--view-sub view)))
    (when (and (stringp sub) agentd--conn)
      (remhash sub (agentd--conn-subs agentd--conn))))
  (setf (agentd--view-sub view) nil)
  (pcase (alist-get 'reason item)
    ("lagged" (agentd--subscribe view))
    ("session_closed" (setf (agentd--view-state view) 'closed))
    ;; The connection closes next; the sentinel reconnects.
    ("daemon_shutdown" nil))
  (agentd--refresh-status view))

;;;; The transcript

(defvar agentd-transcript-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'agentd-toggle-fold)
    (define-key map (kbd "<tab>") #'agentd-toggle-fold)
    (define-key map (kbd "s") #'agentd-submit)
    (define-key map (kbd "RET") #'agentd-compose)
    (define-key map (kbd "S") #'agentd-steer)
    (define-key map (kbd "f") #'agentd-follow-up)
    (define-key map (kbd "C-c C-c") #'agentd-abort)
    (define-key map (kbd "a") #'agentd-abort)
    (define-key map (kbd "r") #'agentd-respond)
    (define-key map (kbd "F") #'agentd-fork)
    (define-key map (kbd "U") #'agentd-rollback)
    (define-key map (kbd "u") #'agentd-undo)
    (define-key map (kbd "R") #'agentd-redo)
    (define-key map (kbd "D") #'agentd-diff)
    (define-key map (kbd "Q") #'agentd-queue)
    (define-key map (kbd "K") #'agentd-queue-clear)
    (define-key map (kbd "C") #'agentd-close)
    (define-key map (kbd "d") #'agentd-show-diff)
    (define-key map (kbd "l") #'agentd-sessions)
    (define-key map (kbd "n") #'agentd-next-item)
    (define-key map (kbd "p") #'agentd-previous-item)
    map)
  "Keys of a transcript buffer.")

(define-derived-mode agentd-transcript-mode special-mode "agentd"
  "A session's transcript, streamed from the daemon.

\\{agentd-transcript-mode-map}"
  (setq-local truncate-lines nil)
  (setq-local mode-line-process '(:eval (agentd--mode-line-process)))
  (setq-local header-line-format '(:eval (agentd--header-line))))

(defun agentd--mode-line-process ()
  "The transcript's mode-line status."
  (when agentd--view
    (format " [%s]" (agentd--view-status agentd--view))))

(defun agentd--header-line ()
  "The transcript's header line: title, directory and queue."
  (when-let ((view agentd--view))
    (let* ((queue (agentd--view-queue view))
           (steering (length (alist-get 'steering queue)))
           (follow-up (length (alist-get 'follow_up queue)))
           (pending (length (agentd--view-pending view))))
      (string-join
       (delq nil
             (list (or (agentd--view-title view) (agentd--short (agentd--view-id view)))
                   (and (agentd--view-cwd view)
                        (abbreviate-file-name (agentd--view-cwd view)))
                   (agentd--view-status view)
                   (and (> (+ steering follow-up) 0)
                        (format "queued: %d steering, %d follow-up" steering follow-up))
                   (and (> pending 0) (format "%d awaiting your answer" pending))))
       " · "))))

(defun agentd--refresh-status (view)
  "Redisplay VIEW's mode line and header line."
  (when (buffer-live-p (agentd--view-buffer view))
    (with-current-buffer (agentd--view-buffer view)
      (force-mode-line-update))))

(defmacro agentd--at-end (view &rest body)
  "Run BODY at the end of VIEW's transcript, writable.
Windows (and point) at the end stay at the end, so output is followed."
  (declare (indent 1) (debug t))
  (let ((buffer (make-symbol "buffer"))
        (windows (make-symbol "windows"))
        (follow (make-symbol "follow")))
    `(let ((,buffer (agentd--view-buffer ,view)))
       (when (buffer-live-p ,buffer)
         (with-current-buffer ,buffer
           (let* ((inhibit-read-only t)
                  (,follow (= (point) (point-max)))
                  (,windows (seq-filter (lambda (w) (= (window-point w) (point-max)))
                                        (get-buffer-window-list ,buffer nil t))))
             (save-excursion
               (goto-char (point-max))
               ,@body)
             (when ,follow (goto-char (point-max)))
             (dolist (w ,windows) (set-window-point w (point-max)))))))))

(defun agentd--fresh-line ()
  "Start a new line unless at the beginning of one."
  (unless (bolp) (insert "\n")))

(defun agentd--line (face format-string &rest args)
  "Insert a line from FORMAT-STRING and ARGS in FACE, on a line of its own."
  (agentd--fresh-line)
  (insert (propertize (apply #'format format-string args) 'face face 'agentd-item t) "\n"))

(defun agentd--note (view face format-string &rest args)
  "Add a line from FORMAT-STRING and ARGS in FACE to VIEW's transcript."
  (agentd--at-end view
		  (agentd--close-streams view)
		  (apply #'agentd--line face format-string args)))

(defun agentd--close-streams (view)
  "End VIEW's open reasoning and text.
What follows then begins on a line of its own."
  (when-let ((ov (agentd--view-reasoning view)))
    (save-excursion
      (goto-char (overlay-end ov))
      (unless (bolp)
        (insert "\n")
        (move-overlay ov (overlay-start ov) (point))))
    (setf (agentd--view-reasoning view) nil))
  (when (agentd--view-text-open view)
    (agentd--fresh-line)
    (setf (agentd--view-text-open view) nil)))

(defun agentd--fold (start end label)
  "Fold the text from START to END, showing LABEL in its place."
  (let ((ov (make-overlay start end nil t nil)))
    (overlay-put ov 'agentd-fold label)
    (overlay-put ov 'display label)
    ov))

(defun agentd-toggle-fold ()
  "Fold or unfold the reasoning or tool output at point."
  (interactive)
  (let ((ov (seq-find (lambda (o) (overlay-get o 'agentd-fold))
                      (overlays-in (line-beginning-position)
                                   (min (point-max) (1+ (line-end-position)))))))
    (if (not ov)
        (user-error "Nothing folds here")
      (overlay-put ov 'display (unless (overlay-get ov 'display)
                                 (overlay-get ov 'agentd-fold))))))

(defun agentd-next-item ()
  "Move to the next item of the transcript."
  (interactive)
  (let ((pos (next-single-property-change (line-end-position) 'agentd-item)))
    (when pos
      (goto-char (if (get-text-property pos 'agentd-item) pos
                   (or (next-single-property-change pos 'agentd-item) pos))))))

(defun agentd-previous-item ()
  "Move to the previous item of the transcript."
  (interactive)
  (let ((pos (previous-single-property-change (line-beginning-position) 'agentd-item)))
    (when pos
      (goto-char (if (get-text-property pos 'agentd-item) pos
                   (or (previous-single-property-change pos 'agentd-item) pos)))
      (goto-char (line-beginning-position)))))

(defun agentd--json (value)
  "VALUE, parsed from JSON, as compact JSON text."
  (condition-case nil
      (json-serialize (agentd--jsonable value))
    (error (format "%S" value))))

(defun agentd--jsonable (value)
  "VALUE (lists for arrays, alists for objects) ready for `json-serialize'."
  (cond
   ((and (consp value) (consp (car value)) (symbolp (caar value)))
    (mapcar (lambda (pair) (cons (car pair) (agentd--jsonable (cdr pair)))) value))
   ((consp value) (vconcat (mapcar #'agentd--jsonable value)))
   (t value)))

(defun agentd--args-summary (name args)
  "The arguments ARGS of tool NAME as shown in the call's header."
  (let ((text (if (and (equal name "shell") (stringp (alist-get 'command args)))
                  (alist-get 'command args)
                (agentd--json args))))
    (if (> (length text) agentd-tool-args-max-chars)
        (propertize (concat (substring text 0 agentd-tool-args-max-chars) "…")
                    'help-echo text)
      text)))

(defun agentd--render (view kind data live)
  "Show the event KIND with DATA in VIEW; LIVE is nil while replaying."
  (pcase kind
    ("assistant_text_delta"
     (agentd--at-end view
		     (when (agentd--view-reasoning view)
		       (agentd--close-streams view))
		     (unless (agentd--view-text-open view)
		       (agentd--fresh-line)
		       (setf (agentd--view-text-open view) t))
		     (insert (alist-get 'delta data))))
    ("assistant_reasoning_delta"
     (agentd--at-end view
		     (let ((ov (agentd--view-reasoning view))
			   (start (point)))
		       (unless ov
			 (agentd--close-streams view)
			 (setq start (point)))
		       (insert (propertize (alist-get 'delta data) 'face 'agentd-reasoning))
		       (if ov
			   (move-overlay ov (overlay-start ov) (point))
			 (setf (agentd--view-reasoning view)
			       (agentd--fold start (point)
					     (propertize "▸ thinking… (TAB shows it)\n"
							 'face 'agentd-reasoning 'agentd-item t)))))))
    ("tool_call_output_delta"
     (agentd--tool-output view (alist-get 'call_id data) (alist-get 'delta data)))
    ("tool_call_start" (agentd--tool-start view data))
    ("tool_call_end" (agentd--tool-end view data live))
    ((or "approval_requested" "question_requested" "client_tool_requested")
     (agentd--request view kind data live))
    ((or "approval_resolved" "question_resolved" "client_tool_resolved")
     (agentd--resolved view kind data))
    ("state_changed"
     (setf (agentd--view-state view) (agentd--state (alist-get 'state data)))
     (agentd--refresh-status view))
    ("queue_changed"
     (setf (agentd--view-queue view) (alist-get 'queue data))
     (agentd--refresh-status view))
    (_
     (agentd--at-end view
		     (agentd--close-streams view)
		     (agentd--render-line view kind data live)))))

(defun agentd--render-line (view kind data live)
  "Insert the lines of the event KIND with DATA in VIEW.
LIVE is as in `agentd--render'."
  (pcase kind
    ("session_start"
     (agentd--line 'agentd-dim "Session %s%s in %s (%s, %s)"
                   (agentd--view-id view)
                   (let ((title (alist-get 'title data))) (if title (format " “%s”" title) ""))
                   (alist-get 'cwd data)
                   (alist-get 'provider (alist-get 'config data))
                   (alist-get 'model (alist-get 'config data))))
    ("user_input"
     (insert "\n")
     (agentd--line 'agentd-user "> %s" (alist-get 'text data)))
    ("steering_injected"
     (agentd--line 'agentd-user "> (steer) %s" (alist-get 'text data)))
    ("assistant_text_start" nil)
    ("assistant_text_end" nil)
    ("usage"
     (let ((one (alist-get 'call data))
           (total (alist-get 'total data)))
       (setf (agentd--view-usage view) total)
       (agentd--line 'agentd-dim "usage: %s · session: %s"
                     (agentd--usage-text one) (agentd--usage-text total))))
    ("processing_end"
     (let ((reason (alist-get 'reason data)))
       (agentd--line (if (member reason '("completed" "aborted")) 'agentd-dim 'agentd-warning)
                     "── %s ──" (string-replace "_" " " reason))))
    ("warning"
     (agentd--line 'agentd-warning "warning: %s" (alist-get 'message data)))
    ("error"
     (agentd--line 'agentd-error "error: %s" (alist-get 'message data))
     (when live
       (message "agentd: %s" (alist-get 'message data))))
    ("turn_limit"
     (agentd--line 'agentd-warning "turn limit %s reached (%s)"
                   (alist-get 'limit data) (alist-get 'count data)))
    ("loop_detection"
     (agentd--line 'agentd-warning "loop detected: %s" (alist-get 'message data)))
    ("compaction"
     (agentd--line 'agentd-dim "compacted %s entries (%s → %s tokens)"
                   (alist-get 'entries_summarized data)
                   (alist-get 'tokens_before data) (alist-get 'tokens_after data)))
    ("subagent_spawned"
     (agentd--line 'agentd-dim "subagent %s started: %s"
                   (agentd--short (alist-get 'agent_id data)) (alist-get 'task data)))
    ("subagent_finished"
     (agentd--line 'agentd-dim "subagent %s finished (%s)"
                   (agentd--short (alist-get 'agent_id data))
                   (if (alist-get 'success data) "succeeded" "failed")))
    ("rollback"
     (agentd--line 'agentd-dim "rolled back %s entries" (alist-get 'removed data)))
    ("redo"
     (agentd--line 'agentd-dim "redone: the entries the rollback took are back"))
    ("events_missing"
     (agentd--line 'agentd-warning "events %s to %s were lost when the daemon stopped"
                   (alist-get 'first_seq data) (alist-get 'last_seq data)))
    ("mcp_server_state"
     ;; Starting is a moment, not news; ready, failed and stopped are.
     (let ((state (alist-get 'state data))
           (reason (alist-get 'reason data)))
       (unless (equal state "starting")
         (agentd--line (if (equal state "failed") 'agentd-warning 'agentd-dim)
                       "MCP server %s: %s%s"
                       (alist-get 'server data)
                       (if (equal state "ready")
                           (format "ready, %d tools" (length (alist-get 'tools data)))
                         state)
                       (if reason (format " (%s)" reason) "")))))
    ("session_end"
     (setf (agentd--view-state view) 'closed)
     (agentd--line 'agentd-dim "── session closed (%s) ──" (alist-get 'reason data)))))

(defun agentd--usage-text (usage)
  "USAGE (a Usage object) in a few words."
  (concat
   (format "in %s, out %s" (or (alist-get 'input_tokens usage) 0)
           (or (alist-get 'output_tokens usage) 0))
   (let ((cached (alist-get 'cache_read_tokens usage)))
     (if (and cached (> cached 0)) (format ", cached %s" cached) ""))
   (let ((cost (alist-get 'cost_usd usage)))
     (if cost (format ", $%.4f" cost) ""))
   (let ((unknown (alist-get 'unreported_calls usage)))
     (if (and unknown (> unknown 0)) (format " (+%s unreported)" unknown) ""))))

;;;; Tool calls

(defun agentd--tool-start (view data)
  "Show the start of the tool call in DATA in VIEW."
  (agentd--at-end view
		  (agentd--close-streams view)
		  (let ((name (alist-get 'tool_name data))
			(args (alist-get 'arguments data))
			status-start status-end out-start)
		    (insert (propertize (format "⚙ %s " name) 'face 'agentd-tool 'agentd-item t)
			    (propertize (agentd--args-summary name args) 'face 'agentd-tool-args)
			    " ")
		    (setq status-start (point-marker))
		    (insert (propertize "[running]" 'face 'agentd-running))
		    (setq status-end (point-marker))
		    (insert "\n")
		    (setq out-start (point-marker))
		    (puthash (alist-get 'call_id data)
			     (list :name name :args args :status-start status-start
				   :status-end status-end :out-start out-start
				   :out-end (copy-marker out-start))
			     (agentd--view-tools view)))))

(defun agentd--tool-output (view call-id text)
  "Add TEXT to the output of the tool call CALL-ID in VIEW."
  (when-let ((call (gethash call-id (agentd--view-tools view))))
    (agentd--at-end view
		    (let ((end (plist-get call :out-end)))
		      (goto-char end)
		      (insert (propertize text 'face 'agentd-tool-output))
		      (set-marker end (point))))))

(defun agentd--tool-end (view data live)
  "Show the end of the tool call in DATA in VIEW; LIVE as in `agentd--render'."
  (let* ((id (alist-get 'call_id data))
         (call (gethash id (agentd--view-tools view)))
         (err (alist-get 'error data))
         (output (or err (alist-get 'output data) "")))
    (when call
      (remhash id (agentd--view-tools view))
      (agentd--at-end view
		      (let ((start (plist-get call :out-start))
			    (end (plist-get call :out-end)))
			(goto-char (plist-get call :status-start))
			(delete-region (point) (plist-get call :status-end))
			(insert (if err
				    (propertize "[failed]" 'face 'agentd-error)
				  (propertize (format "[done, %s ms]" (alist-get 'duration_ms data))
					      'face 'agentd-ok)))
			;; The end event has the full output; what streamed before may be partial.
			(delete-region start end)
			(goto-char start)
			(insert (propertize output 'face (if err 'agentd-error 'agentd-tool-output)))
			(unless (or (string-empty-p output) (bolp)) (insert "\n"))
			(set-marker end (point))
			(let ((lines (count-lines start end)))
			  (when (> lines agentd-tool-output-max-lines)
			    (goto-char start)
			    (forward-line agentd-tool-output-max-lines)
			    (agentd--fold (point) end
					  (propertize (format "  … %d more lines (TAB shows them)\n"
							      (- lines agentd-tool-output-max-lines))
						      'face 'agentd-dim))))
			(dolist (m (list start end (plist-get call :status-start)
					 (plist-get call :status-end)))
			  (set-marker m nil))))
      (unless err
        (agentd--edited view (plist-get call :name) (plist-get call :args) live)))))

;;;; Edits

(defun agentd--diff-buffer (view)
  "VIEW's buffer of the agent's edits."
  (let ((name (format "*agentd diff: %s*" (agentd--short (agentd--view-id view)))))
    (or (get-buffer name)
        (with-current-buffer (get-buffer-create name)
          (diff-mode)
          (setq buffer-read-only t)
          (current-buffer)))))

(defun agentd--unified-diff (old new label)
  "A unified diff from the text OLD to NEW, both named LABEL (nil if equal)."
  (let ((a (make-temp-file "agentd-old"))
        (b (make-temp-file "agentd-new")))
    (unwind-protect
        (progn
          (let ((coding-system-for-write 'utf-8-unix))
            (write-region old nil a nil 'silent)
            (write-region new nil b nil 'silent))
          (with-temp-buffer
            (let ((coding-system-for-read 'utf-8-unix))
              (call-process diff-command nil t nil "-u"
                            "--label" (concat "a/" label) "--label" (concat "b/" label) a b))
            (and (> (buffer-size) 0) (buffer-string))))
      (delete-file a)
      (delete-file b))))

(defun agentd--line-ended (text)
  "TEXT (a string, or nil for none) ending with a newline unless empty."
  (cond ((or (null text) (string-empty-p text)) "")
        ((string-suffix-p "\n" text) text)
        (t (concat text "\n"))))

(defun agentd--edited (view tool args live)
  "Record the edit the call of TOOL with ARGS made in VIEW; show it when LIVE."
  (let* ((path (alist-get 'file_path args))
         (file (and path (expand-file-name path (agentd--view-cwd view))))
         (visiting (and file (find-buffer-visiting file)))
         (diff
          (pcase tool
            ("edit_file"
             (agentd--unified-diff (agentd--line-ended (alist-get 'old_string args))
                                   (agentd--line-ended (alist-get 'new_string args))
                                   path))
            ("write_file"
             ;; The file's earlier text is known only from a buffer visiting
             ;; it, and only while the edit is live.
             (agentd--unified-diff (if (and live visiting)
                                       (with-current-buffer visiting
                                         (buffer-substring-no-properties (point-min) (point-max)))
                                     "")
                                   (or (alist-get 'content args) "")
                                   path))
            ("apply_patch" (alist-get 'patch args)))))
    (when (and live visiting (not (buffer-modified-p visiting)))
      (with-current-buffer visiting
        (revert-buffer t t t)))
    (when diff
      (let ((buffer (agentd--diff-buffer view)))
        (with-current-buffer buffer
          (let ((inhibit-read-only t))
            (goto-char (point-max))
            (insert diff)
            (unless (bolp) (insert "\n"))))
        (when (and live agentd-show-edits)
          (display-buffer buffer '(nil (inhibit-same-window . t))))))))

(defun agentd-show-diff (session)
  "Show the edits the agent made in SESSION, as a diff."
  (interactive (list (agentd--session-arg)))
  (let ((view (gethash session agentd--views)))
    (unless view (agentd--fail "Session %s is not attached" session))
    (pop-to-buffer (agentd--diff-buffer view))))

;;;; Requests: approvals, questions, client tools

(defun agentd--insert-diff (diff)
  "Insert DIFF, its added and removed lines in diff faces."
  (dolist (line (split-string (string-trim-right diff "\n") "\n"))
    (insert (propertize (concat "  " line "\n")
                        'face (cond ((string-prefix-p "+++" line) 'diff-file-header)
                                    ((string-prefix-p "---" line) 'diff-file-header)
                                    ((string-prefix-p "+" line) 'diff-added)
                                    ((string-prefix-p "-" line) 'diff-removed)
                                    ((string-prefix-p "@@" line) 'diff-hunk-header)
                                    (t 'agentd-tool-output))))))

(defun agentd--multi-line-p (text)
  "Whether TEXT is a string of more than one line."
  (and (stringp text) (string-search "\n" (string-trim-right text)) t))

(defun agentd--request-label (request)
  "What REQUEST (a pending request or its event's data) asks, in one line."
  (pcase (alist-get 'type request)
    ("question"
     (concat (alist-get 'question request)
             (let ((options (alist-get 'options request)))
               (if options (format " [%s]" (string-join options " / ")) ""))))
    ("client_tool"
     (format "run the client tool %s %s" (alist-get 'tool request)
             (agentd--json (alist-get 'arguments request))))
    (_
     (let ((tool (alist-get 'tool request))
           (summary (alist-get 'summary request)))
       (cond
        ;; An edit's summary is its diff, shown below the line.
        ((agentd--multi-line-p summary)
         (string-trim-right (format "approve %s %s" tool
                                    (or (alist-get 'file_path (alist-get 'arguments request))
                                        ""))))
        ((and summary (not (string-empty-p summary)))
         (format "approve %s: %s" tool summary))
        (t (format "approve %s: %s" tool
                   (agentd--args-summary tool (alist-get 'arguments request)))))))))

(defun agentd--in-call (view call-id insert)
  "Call INSERT at the place of requests in the tool call CALL-ID of VIEW.
That is under the call's header line, before its output; without such a
call, at the end of the transcript."
  (let ((call (gethash call-id (agentd--view-tools view))))
    (agentd--at-end view
		    (agentd--close-streams view)
		    (if (not call)
			(funcall insert)
		      (let* ((start (plist-get call :out-start))
			     (end (plist-get call :out-end))
			     (empty (= start end)))
			(goto-char start)
			(funcall insert)
			(set-marker start (point))
			(when empty (set-marker end (point))))))))

(defun agentd--request (view kind data live)
  "Show the request of KIND with DATA in VIEW; LIVE as in `agentd--render'."
  (let* ((request (cons (cons 'type (string-remove-suffix "_requested" kind)) data))
         (summary (alist-get 'summary data)))
    (setf (agentd--view-pending view) (append (agentd--view-pending view) (list request)))
    (agentd--in-call
     view (alist-get 'call_id data)
     (lambda ()
       (agentd--line 'agentd-request "? %s  (%s answers)" (agentd--request-label request)
                     (substitute-command-keys
                      "\\<agentd-transcript-mode-map>\\[agentd-respond]"))
       (when (agentd--multi-line-p summary)
         (agentd--insert-diff summary))))
    (agentd--refresh-status view)
    (when live
      (message "agentd: session %s asks: %s (M-x agentd-respond)"
               (or (agentd--view-title view) (agentd--short (agentd--view-id view)))
               (agentd--request-label request)))))

(defun agentd--resolved (view kind data)
  "Show the settling of a request (event KIND with DATA) in VIEW."
  (let ((id (alist-get 'request_id data))
        (by (alist-get 'by data)))
    (setf (agentd--view-pending view)
          (seq-remove (lambda (r) (equal (alist-get 'request_id r) id))
                      (agentd--view-pending view)))
    (agentd--in-call
     view (alist-get 'call_id data)
     (lambda ()
       (pcase kind
         ("approval_resolved"
          (let ((decision (alist-get 'decision data)))
            (agentd--line (if (equal decision "deny") 'agentd-warning 'agentd-ok)
                          "  %s %s (%s)%s"
                          (pcase decision
                            ("allow" "allowed")
                            ("allow_always" "allowed always")
                            (_ "denied"))
                          (alist-get 'tool data) by
                          (let ((msg (alist-get 'message data)))
                            (if msg (concat ": " msg) "")))))
         ("question_resolved"
          (let ((answer (alist-get 'answer data)))
            (agentd--line (if answer 'agentd-ok 'agentd-warning) "  %s (%s)"
                          (if answer (format "answered: %s" answer) "unanswered") by)))
         (_ (agentd--line (if (alist-get 'is_error data) 'agentd-warning 'agentd-ok)
                          "  client tool %s (%s)"
                          (if (alist-get 'is_error data) "failed" "answered") by)))))
    (agentd--refresh-status view)))

(defun agentd--pending (session)
  "The requests of SESSION waiting for an answer, oldest first, from the daemon."
  (alist-get 'pending (agentd--call "session/get" (list :session_id session))))

(defun agentd--read-response ()
  "Read the arguments of `agentd-respond': show the request, ask for the answer."
  (let* ((session (agentd--session-arg))
         (pending (agentd--pending session))
         (request
          (cond
           ((null pending)
            (agentd--fail "Session %s has no request waiting for an answer"
                          (agentd--short session)))
           ((cdr pending)
            (let ((table (mapcar (lambda (r) (cons (agentd--request-label r) r)) pending)))
              (cdr (assoc (completing-read "Answer which request: " table nil t) table))))
           (t (car pending)))))
    (when (agentd--multi-line-p (alist-get 'summary request))
      (with-current-buffer (get-buffer-create "*agentd request*")
        (let ((inhibit-read-only t))
          (erase-buffer)
          (insert (alist-get 'summary request))
          (diff-mode)
          (setq buffer-read-only t)
          (display-buffer (current-buffer)))))
    (list (pcase (alist-get 'type request)
            ("approval"
             (pcase (car (read-multiple-choice
                          (agentd--request-label request)
                          '((?a "allow" "Run this call")
                            (?A "always" "Run it, and never ask again for this call")
                            (?d "deny" "Refuse it; the model is told"))))
               (?a 'allow)
               (?A 'always)
               (_ 'deny)))
            ("question"
             (completing-read (concat (alist-get 'question request) " ")
                              (alist-get 'options request)))
            (_ (read-string (format "Output of %s: " (alist-get 'tool request)))))
          session
          (alist-get 'request_id request))))

;;;###autoload
(defun agentd-respond (answer &optional session request-id)
  "Answer the request REQUEST-ID (the oldest) of SESSION with ANSWER.
For an approval, ANSWER is `allow', `always' (allow, and never ask
again for the same call) or `deny'; for a question, the answer text;
for a client tool, its output.  Interactively, show the request and ask
for the answer.  Return the daemon's response."
  (interactive (agentd--read-response))
  (let* ((session (or session (agentd--session-arg)))
         (pending (agentd--pending session))
         (request (if request-id
                      (or (seq-find (lambda (r) (equal (alist-get 'request_id r) request-id))
                                    pending)
                          (agentd--fail "Request %s of session %s no longer waits"
                                        request-id (agentd--short session)))
                    (or (car pending)
                        (agentd--fail "Session %s has no request waiting for an answer"
                                      (agentd--short session)))))
         (answer-params
          (pcase (alist-get 'type request)
            ("approval"
             (list :decision (pcase answer
                               ('allow "allow")
                               ('always "allow_always")
                               ('deny "deny")
                               (_ (agentd--fail "Answer an approval with allow, always or deny")))))
            ("question"
             (unless (stringp answer) (agentd--fail "Answer a question with text"))
             (list :answer answer))
            (_
             (unless (stringp answer) (agentd--fail "Answer a client tool with its output"))
             (list :output answer))))
         (result (agentd--call "session/respond"
                               (append (list :session_id session
                                             :request_id (alist-get 'request_id request))
                                       answer-params)))
         (left (alist-get 'pending result)))
    (agentd--use session)
    (message "agentd: answered%s" (if (and left (> left 0))
                                      (format "; %d more waiting" left)
                                    ""))
    result))

;;;; Picking a session

(defun agentd--list ()
  "The daemon's session summaries."
  (alist-get 'sessions (agentd--call "session/list")))

(defun agentd--read-session (prompt)
  "Read a session id with PROMPT, completing over the daemon's sessions."
  (let* ((sessions (agentd--list))
         (table (mapcar (lambda (s)
                          (cons (format "%s  %s  %s  %s"
                                        (agentd--short (alist-get 'session_id s))
                                        (or (alist-get 'title s) "-")
                                        (agentd--state-label (agentd--state (alist-get 'state s)))
                                        (abbreviate-file-name (alist-get 'cwd s)))
                                (alist-get 'session_id s)))
                        sessions)))
    (unless table (agentd--fail "The daemon holds no session; start one with `agentd-new'"))
    (cdr (assoc (completing-read prompt table nil t) table))))

(defun agentd--session-arg ()
  "The session a command acts on: the transcript's, the last one, or one read."
  (or (and agentd--view (agentd--view-id agentd--view))
      (and (derived-mode-p 'agentd-sessions-mode) (tabulated-list-get-id))
      (and agentd--last-session
           (let ((view (gethash agentd--last-session agentd--views)))
             (and view (buffer-live-p (agentd--view-buffer view))))
           agentd--last-session)
      (agentd--read-session "Session: ")))

(defun agentd--use (session)
  "Remember SESSION as the one commands act on; return it."
  (setq agentd--last-session session))

;;;; Commands

(defun agentd--project-dir ()
  "Return the directory for a new session.
That is the project root, else `default-directory'."
  (expand-file-name
   (or (when-let ((project (project-current)))
         (project-root project))
       default-directory)))

;;;###autoload
(defun agentd-new (dir &optional title)
  "Start a session in DIR (the project root) with TITLE; show its transcript.
With a prefix argument, ask for the directory and the title.  Return the
session's id."
  (interactive
   (if current-prefix-arg
       (list (read-directory-name "Session directory: " (agentd--project-dir))
             (let ((title (read-string "Title (optional): ")))
               (unless (string-empty-p title) title)))
     (list (agentd--project-dir) nil)))
  (let* ((snapshot (agentd--call "session/create"
                                 (append (list :cwd (directory-file-name (expand-file-name dir)))
                                         (and title (list :title title))
                                         (and agentd-provider (list :provider agentd-provider))
                                         (and agentd-model (list :model agentd-model))
                                         (and agentd-approval-mode
                                              (list :config
                                                    (list :approval
                                                          (list :mode agentd-approval-mode)))))))
         (id (alist-get 'session_id snapshot)))
    (agentd--show (agentd--view-for snapshot))
    (agentd--use id)))

(defun agentd--show (view)
  "Follow VIEW's session if it is not followed yet, and show its transcript."
  (unless (agentd--view-sub view)
    (agentd--subscribe view))
  (pop-to-buffer (agentd--view-buffer view))
  view)

;;;###autoload
(defun agentd-attach (session)
  "Show the transcript of SESSION, from its first event, and follow it.
Any session works, including one started by `agentctl'."
  (interactive (list (agentd--read-session "Attach to session: ")))
  (agentd--show (agentd--view-for (agentd--call "session/get" (list :session_id session))))
  (agentd--use session))

(defun agentd--input (method session text &optional extra)
  "Send TEXT to SESSION with METHOD (plus the plist EXTRA); report what happened."
  (when (string-empty-p (string-trim text))
    (agentd--fail "Nothing to send"))
  (let* ((result (agentd--call method (append (list :session_id session :text text) extra)))
         (disposition (alist-get 'disposition result)))
    (agentd--use session)
    (unless (equal disposition "started")
      (message "agentd: queued as %s" (string-replace "_" "-" disposition)))
    result))

;;;; Skills and prompt commands

(defun agentd--commands (session)
  "Return the skills and prompt commands of SESSION.
An alist of (\"/NAME\" . DESCRIPTION)."
  (mapcar (lambda (command)
            (cons (concat "/" (alist-get 'name command))
                  (alist-get 'description command)))
          (alist-get 'commands
                     (agentd--call "session/commands"
                                   (list :session_id session)))))

(defun agentd--read-prompt (prompt session)
  "Read text with PROMPT, completing the `/NAME' commands of SESSION.
Its skills and prompt commands complete; any text is accepted, and the
daemon expands what names a command or a skill."
  (let* ((commands (condition-case nil
                       (agentd--commands session)
                     (agentd-error nil)))
         (completion-extra-properties
          (list :annotation-function
                (lambda (name)
                  (let ((description (cdr (assoc name commands))))
                    (and description (concat "  " description)))))))
    (if commands
        (completing-read prompt commands nil nil)
      (read-string prompt))))

;;;###autoload
(defun agentd-submit (text &optional session)
  "Submit TEXT to SESSION.
It begins at once when the session is idle, else it is queued.  Interactively,
the session's skills and prompt commands complete after `/'."
  (interactive (let ((session (agentd--session-arg)))
                 (list (agentd--read-prompt "Prompt: " session) session)))
  (agentd--input "session/submit" (or session (agentd--session-arg)) text))

;;;###autoload
(defun agentd-steer (text &optional session)
  "Steer SESSION with TEXT, injected after the current tool round."
  (interactive (let ((session (agentd--session-arg)))
                 (list (read-string "Steer: ") session)))
  (agentd--input "session/steer" (or session (agentd--session-arg)) text))

;;;###autoload
(defun agentd-follow-up (text &optional session)
  "Queue TEXT for SESSION, run after the current input completes."
  (interactive (let ((session (agentd--session-arg)))
                 (list (read-string "Follow-up: ") session)))
  (agentd--input "session/follow_up" (or session (agentd--session-arg)) text))

;;;###autoload
(defun agentd-abort (&optional session)
  "Stop SESSION's current work; its queued items stay queued."
  (interactive)
  (let* ((session (or session (agentd--session-arg)))
         (result (agentd--call "session/abort" (list :session_id session)))
         (queue (alist-get 'queue result))
         (queued (+ (length (alist-get 'steering queue)) (length (alist-get 'follow_up queue)))))
    (message "agentd: %s%s"
             (if (alist-get 'aborted result) "aborted" "nothing was running")
             (if (> queued 0)
                 (format "; %d queued item%s kept (`agentd-queue-clear' drops them)"
                         queued (if (= queued 1) "" "s"))
               ""))
    result))

;;;###autoload
(defun agentd-close (session)
  "Close SESSION: its work stops and it takes no more input."
  (interactive
   (let ((session (agentd--session-arg)))
     (unless (y-or-n-p (format "Close session %s? " (agentd--short session)))
       (user-error "Not closed"))
     (list session)))
  (agentd--call "session/close" (list :session_id session))
  (when-let ((view (gethash session agentd--views)))
    (setf (agentd--view-state view) 'closed)
    (agentd--refresh-status view))
  (message "agentd: session %s closed" (agentd--short session)))

;;;###autoload
(defun agentd-fork (session &optional title)
  "Copy SESSION's conversation into a new session with TITLE, and show it.
Return the new session's id."
  (interactive (list (agentd--session-arg)
                     (let ((title (read-string "Title of the fork (optional): ")))
                       (unless (string-empty-p title) title))))
  (let* ((snapshot (agentd--call "session/fork"
                                 (append (list :session_id session)
                                         (and title (list :title title)))))
         (id (alist-get 'session_id snapshot)))
    (agentd--show (agentd--view-for snapshot))
    (agentd--use id)))

;;;###autoload
(defun agentd-rollback (session &optional turns)
  "Undo the last user inputs of SESSION (idle), with what followed them.
TURNS says how many (default 1; interactively, the prefix argument).
Nothing is deleted: `agentd-fork' still reaches the entries taken off."
  (interactive (list (agentd--session-arg) (prefix-numeric-value current-prefix-arg)))
  (let ((result (agentd--call "session/rollback"
                              (list :session_id session :turns (or turns 1)))))
    (message "agentd: took %s entries off the branch; %s remain"
             (alist-get 'removed result) (alist-get 'entries result))
    result))

;;;; Undo, redo and the agent's changes

(defun agentd--files-text (files)
  "What FILES (an undo's or a redo's `files') did, in a few words."
  (let ((restored (alist-get 'restored files))
        (kept (alist-get 'kept files))
        (not-restored (alist-get 'not_restored files)))
    (string-join
     (delq nil
           (list (if restored
                     (format "restored %s" (string-join restored ", "))
                   "no file to restore")
                 (and kept (format "your versions of %s are kept (`agentd-redo' brings them back)"
                                   (string-join kept ", ")))
                 (and not-restored (format "not restored: %s" (string-join not-restored "; ")))))
     "; ")))

(defun agentd--revert-files (session files)
  "Revert the unmodified buffers visiting FILES, relative to SESSION's directory."
  (when-let ((view (gethash session agentd--views))
             (cwd (agentd--view-cwd view)))
    (dolist (path (append (alist-get 'restored files) (alist-get 'kept files)))
      (let ((buffer (find-buffer-visiting (expand-file-name path cwd))))
        (when (and buffer (not (buffer-modified-p buffer)))
          (with-current-buffer buffer
            (revert-buffer t t t)))))))

(defun agentd--changed-files (err)
  "The files the JSON-RPC error ERR names as changed by the user, or nil.
The daemon refuses an undo or a redo that would overwrite them unless
it is forced, with a `files_changed' error listing them in its data."
  (let ((data (alist-get 'data err)))
    (when (equal (alist-get 'kind data) "files_changed")
      (let ((files (mapconcat #'identity (alist-get 'files data) ", "))
            (more (alist-get 'more_files data)))
        (if (and (numberp more) (> more 0))
            (format "%s and %d more" files more)
          files)))))

(defun agentd--forcible (method params ask)
  "Call METHOD with PARAMS; if it would overwrite files the user changed, ASK.
The daemon refuses such a call, naming the files.  When ASK is non-nil,
offer to force it (the user's versions are kept for a redo); otherwise,
or when the user declines, signal the refusal."
  (let* ((response (agentd--response method params))
         (files (agentd--changed-files (alist-get 'error response))))
    (cond
     ((not files) (agentd--result method response))
     ((and ask (yes-or-no-p
                (format "You changed %s since the agent did; restore anyway (your versions are kept for `agentd-redo')? "
                        files)))
      (agentd--call method (append params (list :force t))))
     (t (agentd--fail "You changed %s since the agent did, so nothing was restored%s"
                      files (if ask "" "; pass FORCE to restore anyway"))))))

;;;###autoload
(defun agentd-undo (session &optional turns force)
  "Undo SESSION's last inputs: the conversation and the files.
The session must be idle.  TURNS says how many inputs (by default 1;
interactively, the prefix argument).  The files the agent changed in
those inputs are put back as they were before them.  When you changed
one of them since, the whole undo is refused, naming them;
interactively you are asked whether to restore them anyway, and FORCE
does so (your versions are kept, and `agentd-redo' brings them back).
Return the daemon's answer."
  (interactive (list (agentd--session-arg) (prefix-numeric-value current-prefix-arg)))
  (let* ((result (agentd--forcible "session/rollback"
                                   (append (list :session_id session :turns (or turns 1)
                                                 :files t)
                                           (and force (list :force t)))
                                   (called-interactively-p 'any)))
         (files (alist-get 'files result)))
    (agentd--revert-files session files)
    (agentd--use session)
    (message "agentd: undid %s entries; %s" (alist-get 'removed result) (agentd--files-text files))
    result))

;;;###autoload
(defun agentd-redo (session &optional force)
  "Bring back what the last `agentd-undo' of SESSION took away.
Files you changed since the undo are not overwritten unless FORCE (or,
interactively, you agree).  Return the daemon's answer."
  (interactive (list (agentd--session-arg)))
  (let* ((result (agentd--forcible "session/redo"
                                   (append (list :session_id session) (and force (list :force t)))
                                   (called-interactively-p 'any)))
         (files (alist-get 'files result)))
    (agentd--revert-files session files)
    (agentd--use session)
    (message "agentd: redone; %s entries on the branch%s" (alist-get 'entries result)
             (if files (concat "; " (agentd--files-text files)) ""))
    result))

;;;###autoload
(defun agentd-diff (session &optional input-id)
  "Show what the agent changed in SESSION's files for an input, as a diff.
The input is INPUT-ID, else the newest one.  Return the diff's buffer."
  (interactive (list (agentd--session-arg)))
  (let* ((result (agentd--call "session/diff"
                               (append (list :session_id session)
                                       (and input-id (list :input_id input-id)))))
         (diff (alist-get 'diff result))
         (buffer (get-buffer-create (format "*agentd changes: %s*" (agentd--short session)))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert diff)
        (diff-mode)
        (setq buffer-read-only t)
        (goto-char (point-min))))
    (agentd--use session)
    (if (string-empty-p diff)
        (message "agentd: the agent changed no file for that input")
      (pop-to-buffer buffer))
    buffer))

(defun agentd--queue-text (queue)
  "The items of QUEUE, one per line."
  (string-join
   (append (mapcar (lambda (i) (format "steering:  %s" (alist-get 'text i)))
                   (alist-get 'steering queue))
           (mapcar (lambda (i) (format "follow-up: %s" (alist-get 'text i)))
                   (alist-get 'follow_up queue)))
   "\n"))

;;;###autoload
(defun agentd-queue (&optional session)
  "Show SESSION's queued steering and follow-ups; return them."
  (interactive)
  (let* ((session (or session (agentd--session-arg)))
         (queue (agentd--call "session/queue" (list :session_id session)))
         (text (agentd--queue-text queue)))
    (if (string-empty-p text)
        (message "agentd: nothing is queued")
      (message "agentd queue:\n%s" text))
    queue))

;;;###autoload
(defun agentd-queue-clear (&optional session)
  "Remove SESSION's queued steering and follow-ups; return them."
  (interactive)
  (let* ((session (or session (agentd--session-arg)))
         (queue (agentd--call "session/queue_clear" (list :session_id session)))
         (removed (+ (length (alist-get 'steering queue)) (length (alist-get 'follow_up queue)))))
    (message "agentd: removed %d queued item%s" removed (if (= removed 1) "" "s"))
    queue))

(defun agentd--relative (file session)
  "FILE relative to SESSION's directory when inside it, else absolute."
  (let* ((view (gethash session agentd--views))
         (cwd (and view (agentd--view-cwd view))))
    (if (and cwd (file-in-directory-p file cwd))
        (file-relative-name file cwd)
      (abbreviate-file-name file))))

(defun agentd--context (label text)
  "TEXT as a context block headed by LABEL, cut to `agentd-context-max-chars'."
  (let ((cut (> (length text) agentd-context-max-chars)))
    (format "%s%s:\n```\n%s%s```\n" label
            (if cut (format " (its first %d characters)" agentd-context-max-chars) "")
            (if cut (substring text 0 agentd-context-max-chars) text)
            (if (string-suffix-p "\n" text) "" "\n"))))

;;;###autoload
(defun agentd-send-region (start end prompt &optional session)
  "Submit PROMPT with the text from START to END as context, to SESSION."
  (interactive
   (if (use-region-p)
       (let ((session (agentd--session-arg)))
         (list (region-beginning) (region-end) (read-string "Prompt about the region: ")
               session))
     (user-error "No region is active")))
  (let* ((session (or session (agentd--session-arg)))
         (label (if buffer-file-name
                    (format "Lines %d-%d of %s" (line-number-at-pos start)
                            (line-number-at-pos (max start (1- end)))
                            (agentd--relative buffer-file-name session))
                  (format "From the buffer %s" (buffer-name)))))
    (agentd-submit (concat prompt "\n\n"
                           (agentd--context label (buffer-substring-no-properties start end)))
                   session)))

;;;###autoload
(defun agentd-send-file (file prompt &optional session)
  "Submit PROMPT with FILE (the current buffer's) as context, to SESSION."
  (interactive
   (let ((session (agentd--session-arg)))
     (list (or buffer-file-name (read-file-name "File: "))
           (read-string "Prompt about the file: ")
           session)))
  (let ((session (or session (agentd--session-arg)))
        (buffer (find-buffer-visiting file)))
    (agentd-submit
     (concat prompt "\n\n"
             (agentd--context (format "The file %s" (agentd--relative file session))
                              (if buffer
                                  (with-current-buffer buffer
                                    (buffer-substring-no-properties (point-min) (point-max)))
                                (with-temp-buffer
                                  (insert-file-contents file)
                                  (buffer-string)))))
     session)))

;;;; Composing a longer prompt

(defvar-local agentd--compose-target nil
  "The session and method a compose buffer sends to, as (SESSION . METHOD).")

(defvar agentd-compose-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-c") #'agentd-compose-send)
    (define-key map (kbd "C-c C-k") #'agentd-compose-cancel)
    map)
  "Keys of a compose buffer.")

(define-derived-mode agentd-compose-mode text-mode "agentd-compose"
  "Write a prompt; \\[agentd-compose-send] sends it, \\[agentd-compose-cancel] cancels.

\\{agentd-compose-mode-map}"
  (setq-local header-line-format
              (substitute-command-keys
               "Prompt for agentd: \\[agentd-compose-send] sends, \\[agentd-compose-cancel] cancels")))

;;;###autoload
(defun agentd-compose (&optional session method)
  "Write a longer prompt for SESSION in a buffer, sent with METHOD.
METHOD is \"session/submit\" (the default), \"session/steer\" or
\"session/follow_up\"; with a prefix argument, ask which."
  (interactive
   (list (agentd--session-arg)
         (if current-prefix-arg
             (concat "session/" (completing-read "Send as: " '("submit" "steer" "follow_up") nil t))
           "session/submit")))
  (let ((session (or session (agentd--session-arg))))
    (pop-to-buffer (get-buffer-create (format "*agentd compose: %s*" (agentd--short session))))
    (agentd-compose-mode)
    (setq agentd--compose-target (cons session (or method "session/submit")))))

(defun agentd-compose-send ()
  "Send the compose buffer's text and bury it."
  (interactive)
  (let ((target agentd--compose-target)
        (text (buffer-substring-no-properties (point-min) (point-max))))
    (unless target (user-error "This buffer has no session to send to"))
    (agentd--input (cdr target) (car target) text)
    (erase-buffer)
    (quit-window t)))

(defun agentd-compose-cancel ()
  "Drop the compose buffer's text."
  (interactive)
  (quit-window t))

;;;; The session list

(defvar agentd--sessions-timer nil
  "Pending refresh of the session list, or nil.")

(defvar agentd-sessions-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'agentd-sessions-attach)
    (define-key map (kbd "a") #'agentd-abort)
    (define-key map (kbd "C") #'agentd-close)
    (define-key map (kbd "F") #'agentd-fork)
    (define-key map (kbd "s") #'agentd-submit)
    map)
  "Keys of the session list.")

(define-derived-mode agentd-sessions-mode tabulated-list-mode "agentd-sessions"
  "The sessions the daemon holds; it refreshes as they change.

\\{agentd-sessions-mode-map}"
  (setq tabulated-list-format [("Title" 24 t) ("State" 15 t) ("Directory" 36 t)
                               ("Parent" 9 t) ("Updated" 20 t) ("Id" 9 t)])
  (setq tabulated-list-sort-key nil)
  (add-hook 'tabulated-list-revert-hook #'agentd--sessions-entries nil t)
  (tabulated-list-init-header))

(defun agentd--sessions-entries ()
  "Fill the session list from the daemon."
  (setq tabulated-list-entries
        (mapcar (lambda (s)
                  (let ((id (alist-get 'session_id s)))
                    (list id (vector (or (alist-get 'title s) "")
                                     (agentd--state-label (agentd--state (alist-get 'state s)))
                                     (abbreviate-file-name (alist-get 'cwd s))
                                     (agentd--short (alist-get 'parent_id s))
                                     (or (alist-get 'updated s) "")
                                     (agentd--short id)))))
                (agentd--list))))

(defun agentd--watch-daemon (conn)
  "Subscribe CONN to daemon-wide events, for the session list."
  (unless (agentd--conn-daemon-sub conn)
    (condition-case err
        (agentd--send conn "daemon/subscribe" nil
                      (lambda (msg)
                        (setf (agentd--conn-daemon-sub conn) (alist-get 'result msg))))
      (agentd-error (message "agentd: %s" (error-message-string err))))))

(defun agentd--sessions-changed ()
  "Refresh the session list soon, once for a burst of events."
  (when (and (get-buffer agentd--sessions-buffer) (not (timerp agentd--sessions-timer)))
    (setq agentd--sessions-timer
          (run-at-time 0.2 nil
                       (lambda ()
                         (setq agentd--sessions-timer nil)
                         (when-let ((buffer (get-buffer agentd--sessions-buffer)))
                           (with-current-buffer buffer
                             (condition-case err
                                 (tabulated-list-revert)
                               (error (message "agentd: %s" (error-message-string err)))))))))))

;;;###autoload
(defun agentd-sessions ()
  "List the daemon's sessions: title, state, directory and parent."
  (interactive)
  (let ((conn (agentd--connection)))
    (with-current-buffer (get-buffer-create agentd--sessions-buffer)
      (agentd-sessions-mode)
      (agentd--sessions-entries)
      (tabulated-list-print)
      (agentd--watch-daemon conn)
      (pop-to-buffer (current-buffer)))))

(defun agentd-sessions-attach ()
  "Attach to the session on this line."
  (interactive)
  (let ((id (tabulated-list-get-id)))
    (unless id (user-error "No session on this line"))
    (agentd-attach id)))

;;;; Status for any mode line

;;;###autoload
(defun agentd-status (&optional session)
  "The state of SESSION (the current one) for a status line, or nil."
  (let* ((id (or session (and agentd--view (agentd--view-id agentd--view)) agentd--last-session))
         (view (and id (gethash id agentd--views))))
    (and view (agentd--view-status view))))

(defun agentd--global-status ()
  "The mode-line text of `agentd-status-mode'."
  (let ((status (agentd-status)))
    (if status (format " agentd[%s]" status) "")))

;;;###autoload
(define-minor-mode agentd-status-mode
  "Show the current agentd session's state in every mode line."
  :global t
  :group 'agentd
  (let ((entry '(:eval (agentd--global-status))))
    (if agentd-status-mode
        (add-to-list 'global-mode-string entry t)
      (setq global-mode-string (delete entry global-mode-string)))))

;;;; Keys

;;;###autoload
(defvar agentd-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "n") #'agentd-new)
    (define-key map (kbd "s") #'agentd-submit)
    (define-key map (kbd "m") #'agentd-compose)
    (define-key map (kbd "S") #'agentd-steer)
    (define-key map (kbd "f") #'agentd-follow-up)
    (define-key map (kbd "a") #'agentd-abort)
    (define-key map (kbd "k") #'agentd-close)
    (define-key map (kbd "l") #'agentd-sessions)
    (define-key map (kbd "o") #'agentd-attach)
    (define-key map (kbd "r") #'agentd-respond)
    (define-key map (kbd "F") #'agentd-fork)
    (define-key map (kbd "u") #'agentd-rollback)
    (define-key map (kbd "z") #'agentd-undo)
    (define-key map (kbd "Z") #'agentd-redo)
    (define-key map (kbd "D") #'agentd-diff)
    (define-key map (kbd "q") #'agentd-queue)
    (define-key map (kbd "Q") #'agentd-queue-clear)
    (define-key map (kbd "c") #'agentd-send-region)
    (define-key map (kbd "b") #'agentd-send-file)
    (define-key map (kbd "d") #'agentd-show-diff)
    map)
  "Keymap of agentd's commands, for a prefix key of your choice.")
;;;###autoload
(fset 'agentd-command-map agentd-command-map)

(provide 'agentd)
;;; agentd.el ends here
