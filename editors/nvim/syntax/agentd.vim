" Highlighting of agentd transcripts (agentd://<session id>), by the line prefixes the
" transcript writes (lua/agentd/transcript.lua).
if exists('b:current_syntax')
  finish
endif

syntax match agentdTitle      /^# .*/
syntax match agentdHeading    /^## .*/
syntax match agentdTool       /^⚙ .*/ contains=agentdToolDone,agentdToolFailed
syntax match agentdToolDone   /✓ done/ contained
syntax match agentdToolFailed /✗ failed/ contained
syntax match agentdReasoning  /^  ┆ .*/
syntax match agentdOutput     /^  [│┃] .*/
syntax match agentdAdded      /^  +.*/
syntax match agentdRemoved    /^  -.*/
syntax match agentdCommand    /^  \$ .*/
syntax match agentdWarning    /^! .*/
syntax match agentdError      /^✗ .*/
syntax match agentdQuestion   /^? .*/
syntax match agentdMeta       /^· .*/
syntax match agentdEnd        /^── .* ──$/

highlight default link agentdTitle      Title
highlight default link agentdHeading    Statement
highlight default link agentdTool       Function
highlight default link agentdToolDone   DiagnosticOk
highlight default link agentdToolFailed DiagnosticError
highlight default link agentdReasoning  Comment
highlight default link agentdOutput     Normal
highlight default link agentdAdded      DiffAdd
highlight default link agentdRemoved    DiffDelete
highlight default link agentdCommand    Special
highlight default link agentdWarning    DiagnosticWarn
highlight default link agentdError      DiagnosticError
highlight default link agentdQuestion   DiagnosticInfo
highlight default link agentdMeta       Comment
highlight default link agentdEnd        NonText

let b:current_syntax = 'agentd'
